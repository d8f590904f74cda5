"""The pool of a GPU kind: every stored study of the built-in model made on that kind (the device's name), on the
same data (aggregate/compare/reruns.py `stored`), pooled per configuration across studies by a random-effects
meta-analysis; what a new host of the kind should measure, and where one study's cells sit in it (torch-free).

    from compile_study.aggregate.compare import pool
    members = pool.members(hosts.load(), "NVIDIA H200")         # the stored cells of one kind (host-effect.json)
    pooled = pool.pooled(members, leave_out="reference/<name>")  # per configuration: mean, CI, PI, verdict
    placed = pool.place(pool.cells_of(records), members, leave_out=...)  # a study's cells against the pool

Per configuration c, each study s contributes its mean log speedup y_s over its processes and its squared standard
error v_s (the processes' variance / n; cells of MIN_N processes or more whose protocol is the judged one's,
aggregate/compare/measured.py). The pool:

  tau^2     the between-host variance: Paule-Mandel's estimator (the tau^2 at which the weighted residual sum
            of squares, weights 1/(v_s + tau^2), equals k - 1; 0 where it is below k - 1 at tau^2 = 0), the
            configuration's own where k >= MIN_STUDIES studies share it; otherwise its class's (aggregate/compare/hosts.py
            CLASSES, the method-of-moments estimate over the class's shared configurations) on the class's degrees
            of freedom, and the pool says so (`tau2_from`); no estimate at all where the kind's class has none
  mean      the weighted mean of y_s, weights 1/(v_s + tau^2), its standard error SE = 1 / sqrt(sum of weights)
  interval  mean +- z_.975 SE (95%): where the kind's mean speedup lies
  predicted mean +- t(df) sqrt(tau^2 + SE^2): the 95% prediction interval for the speedup on one new host of
            the kind (Higgins, Thompson & Spiegelhalter 2009), df = k - 2 with its own tau^2, else the class's
  verdict   against eager: "faster" where the predicted interval's low end clears the A/A band's high end (the
            largest band of the pool's cells, at least compare.MIN_MARGIN), "slower" where its high end lies
            below the band's low end, "within eager's band" otherwise, "no prediction" without one

A study's cell against the pool (`place`): its own mean and SE v against mean +- t(df) sqrt(tau^2 + SE^2 + v) (a
new host's observed mean carries its processes' scatter too): `inside`, `above` or `below` that interval, and
the reproduction verdict: "differs (faster / slower)" where it lies beyond the interval by more than the margin
(compare.margin_of: the larger of the pool's and the study's A/A bands), "reproduced" where the interval is
within [1/T, T] about the pooled mean (T = max(compare.TOLERANCE, margin): a 1.3x shift would fall outside),
else "inconclusive" (the pool's prediction interval too wide, or none). tests/test_pool.py simulates pools
drawn with host effects of the measured sizes: a faithful study is called "differs" in at most 5% per
configuration, a real 1.3x shift of a device-bound cell in at least 80% at n = 3.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import optimize
from scipy import stats as sps

from compile_study.aggregate.compare import compare as cmp
from compile_study.aggregate.compare import hosts, measured
from compile_study.core.intervals import LEVEL, MIN_N

MIN_STUDIES = 3  # a configuration's own tau^2 (and t on k - 2 degrees of freedom) from this many studies
METHOD = ("random effects per configuration: Paule-Mandel tau^2 where 3 or more studies share it (else its "
          "class's method-of-moments tau^2 on the class's degrees of freedom), the inverse-variance weighted mean "
          "with its 95% interval, and the 95% prediction interval for one new host, mean +- t(k-2) sqrt(tau^2 + "
          "SE^2) (Higgins, Thompson & Spiegelhalter 2009)")
KEY = list(hosts.KEY)
FLOOR = 1e-12  # the smallest squared standard error: processes that agree to the last digit still weigh finitely
CELL = [*KEY, "n", "mean", "se2", "idle", "eager_idle", "aa_low", "aa_high", "protocol"]


def paule_mandel(y, v) -> float:
    """Paule-Mandel's tau^2 of estimates y with squared standard errors v (k >= 2): the root of
    sum w (y - mean_w)^2 = k - 1, w = 1 / (v + tau^2); 0 where the sum at tau^2 = 0 is k - 1 or less."""
    y, v = np.asarray(y, float), np.fmax(np.asarray(v, float), FLOOR)

    def excess(tau2: float) -> float:
        w = 1 / (v + tau2)
        return float((w * (y - (w * y).sum() / w.sum()) ** 2).sum()) - (len(y) - 1)

    if len(y) < 2 or excess(0.0) <= 0:
        return 0.0
    high = max(float(np.var(y, ddof=1)), 1e-12)
    while excess(high) > 0:
        high *= 2
    return float(optimize.brentq(excess, 0.0, high, xtol=1e-14))


def combine(y, v, tau2: float | None = None, df: float | None = None, within_df: float | None = None) -> dict:
    """One configuration pooled (module docstring, log units): k, mean, se, tau2, df and tau2_from ("own";
    "class" where tau2 and its df are given because k < MIN_STUDIES; "none" where neither is known: no
    prediction), the interval (ci_low, ci_high) and the prediction interval (pi_low, pi_high). Below
    MIN_STUDIES the studies' own standard errors carry their processes' degrees of freedom (`within_df`, the sum
    of n - 1; None: as many as the class's): the interval is a t on them, and the prediction's df combines them
    with the class's tau^2's by Welch-Satterthwaite, so that one study of three processes is never read as
    surer than its own t interval."""
    y, v = np.asarray(y, float), np.fmax(np.asarray(v, float), FLOOR)
    own = len(y) >= MIN_STUDIES
    if own:
        tau2, df, source = paule_mandel(y, v), len(y) - 2, "own"
    else:
        source = "class" if tau2 is not None and np.isfinite(tau2) and df else "none"
    t2 = tau2 if source != "none" else 0.0
    w = 1 / (v + t2)
    mean, se = float((w * y).sum() / w.sum()), float(1 / np.sqrt(w.sum()))
    z = sps.norm.ppf(1 - (1 - LEVEL) / 2)
    if not own and within_df:
        z = float(hosts.t_quantile(1 - (1 - LEVEL) / 2, within_df))
        if source == "class":  # the prediction's variance: its processes' part (the weighted mean's variance
            # from v alone) and the hosts' rest (tau^2 and its share of se^2)
            spread, part = t2 + se ** 2, float((w ** 2 * v).sum() / w.sum() ** 2)
            df = spread ** 2 / (max(spread - part, 0.0) ** 2 / df + part ** 2 / within_df)
    half = float(hosts.t_quantile(1 - (1 - LEVEL) / 2, df) * np.sqrt(t2 + se ** 2)) if source != "none" else np.nan
    return {"k": len(y), "mean": mean, "se": se, "tau2": t2 if source != "none" else np.nan,
            "df": float(df) if source != "none" else np.nan, "tau2_from": source,
            "ci_low": mean - z * se, "ci_high": mean + z * se, "pi_low": mean - half, "pi_high": mean + half}


def _protocol(table: pd.DataFrame) -> pd.Series:
    return table[list(measured.PROTOCOL)].astype(str).agg("; ".join, axis=1)


def cells_of(records: pd.DataFrame) -> pd.DataFrame:
    """One study's cells as a pool holds them (CELL): per configuration of MIN_N or more processes its n, mean
    log speedup and squared standard error, each side's pace (hosts.paces), its A/A band and its protocol."""
    found = hosts.cells(records).join(hosts.paces(records), on=KEY)
    side = cmp.configurations(records).set_index(KEY)[["aa_band_low", "aa_band_high"]]
    protocol = _protocol(measured.protocol_of(records, KEY))
    found = found.join(side.rename(columns={"aa_band_low": "aa_low", "aa_band_high": "aa_high"}), on=KEY)
    return found.join(protocol.rename("protocol"), on=KEY)[CELL]


def cells_from_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """A study's cells (CELL) from its summary.csv, where its records are not at hand (the paper): the mean log
    speedup is the log of the geometric mean, its squared standard error from the t interval's width on n - 1
    degrees of freedom, each side's pace from the profiled columns; the protocol unknown (NaN: `pooled` takes
    the pool's largest study's)."""
    s = summary[(summary.speedup_n >= MIN_N) & np.isfinite(summary.speedup_low) & (summary.speedup_low > 0)].copy()
    n = s.speedup_n.astype(int)
    q = hosts.t_quantile(1 - (1 - LEVEL) / 2, n - 1)
    s["n"], s["mean"] = n, np.log(s.speedup)
    s["se2"] = ((np.log(s.speedup_high) - np.log(s.speedup_low)) / (2 * q)) ** 2
    s["idle"] = pd.to_numeric(s.steady_step_ms, errors="coerce") / pd.to_numeric(
        s.profile_device_busy_ms_per_step, errors="coerce")
    eager = s[(s.compile_mode == "eager") & (s.compile_scope == "module")].set_index(KEY[:3]).idle
    s["eager_idle"] = [eager.get(c, np.nan) for c in zip(*(s[k] for k in KEY[:3]))]
    return s.assign(protocol=np.nan)[CELL].reset_index(drop=True)


def members(stored: dict, kind: str | None) -> pd.DataFrame:
    """The stored cells of one kind's pool (host-effect.json's `pools`, made by reruns.build: a column `study`),
    empty where the kind has none."""
    found = ((stored.get("pools") or {}).get(kind) or {}).get("cells") or []
    return pd.DataFrame(found, columns=[*CELL, "study"])


def studies(stored: dict, kind: str | None) -> list[str]:
    """The stored studies a kind's pool holds."""
    return list(((stored.get("pools") or {}).get(kind) or {}).get("studies") or [])


def _without(cells: pd.DataFrame, leave_out: str | None) -> pd.DataFrame:
    return cells[cells.study != leave_out] if leave_out else cells


def class_effect(cells: pd.DataFrame) -> dict[str, dict]:
    """The host effect per class of a pool's cells (hosts.estimate_from: the method of moments)."""
    return hosts.effect_dict(hosts.estimate_from(hosts.classed(cells))) if len(cells) else {}


def _margin(rows: pd.DataFrame) -> float:
    return cmp.margin_of(*zip(rows.aa_low, rows.aa_high))


def _verdict(p: dict, margin: float) -> str:
    if not np.isfinite(p["pi_low"]) or not np.isfinite(margin):
        return "no prediction"
    if p["pi_low"] > np.log(margin):
        return "faster"
    return "slower" if p["pi_high"] < -np.log(margin) else "within eager's band"


def pooled(cells: pd.DataFrame, leave_out: str | None = None, protocols: pd.Series | None = None) -> pd.DataFrame:
    """Per configuration of the pool (one row each, KEY columns): its class, the studies pooled, combine's
    numbers, the A/A margin and the verdict against eager; `leave_out` a study's cells left out (a study is
    never judged by a pool that holds it), `protocols` (index KEY) the protocol a configuration's cells must
    have (a judged study's; None: that of the cells of the study with most configurations)."""
    cells = hosts.classed(_without(cells, leave_out)) if len(_without(cells, leave_out)) else None
    if cells is None:
        return pd.DataFrame(columns=[*KEY, "class", "studies", "processes", "k", "mean", "se", "tau2", "df", "tau2_from",
                                     "ci_low", "ci_high", "pi_low", "pi_high", "margin", "verdict"])
    effect = class_effect(cells)
    size = cells.groupby("study").size()
    rows = []
    for key, g in cells.groupby(KEY, sort=True):
        want = protocols.get(key) if protocols is not None else None
        want = g.loc[g.study.map(size).idxmax(), "protocol"] if want is None or want != want else want
        if want != want:  # only unknown protocols: the largest study's among the known, if any
            want = next((p for p in g.sort_values("study", key=lambda s: -s.map(size)).protocol if p == p), want)
        g = g[(g.protocol == want) | g.protocol.isna()]  # an unknown protocol (cells_from_summary) differs from none
        if not len(g):
            continue
        found = effect.get(g["class"].iloc[0]) or {}
        tau = found.get("sd")
        p = combine(g["mean"], g.se2, None if tau is None else tau ** 2, found.get("df") or None,
                    float((g.n - 1).clip(lower=1).sum()))
        margin = _margin(g)
        rows.append(dict(zip(KEY, key)) | {"class": g["class"].iloc[0], "studies": sorted(g.study),
                                           "processes": int(g.n.sum())} | p
                    | {"margin": margin, "verdict": _verdict(p, margin)})
    return pd.DataFrame(rows)


def place(mine: pd.DataFrame, cells: pd.DataFrame, leave_out: str | None = None) -> pd.DataFrame:
    """A study's cells (cells_of) against the pool of its kind, without `leave_out` (the study's own name where
    it is stored in it): per configuration both sides, the interval a new host's cell should fall in, where the
    study's falls (`place`: inside, above, below; "none" without a prediction) and the verdict (module
    docstring; the pool's own verdict against eager as `pool_verdict`). Configurations the pool lacks are left out."""
    pool = pooled(cells, leave_out, mine.set_index(KEY).protocol).rename(columns={"verdict": "pool_verdict"})
    if not len(pool):
        return pool.assign(study_mean=[], study_se2=[], study_n=[], low=[], high=[], place=[], ratio=[], verdict=[],
                           reason=[])
    both = pool.merge(mine[[*KEY, "n", "mean", "se2", "aa_low", "aa_high"]].rename(
        columns={"n": "study_n", "mean": "study_mean", "se2": "study_se2"}), on=KEY)
    half = hosts.t_quantile(1 - (1 - LEVEL) / 2, both.df.fillna(1)) * np.sqrt(
        both.tau2 + both.se ** 2 + both.study_se2)
    both["low"], both["high"] = both["mean"] - half, both["mean"] + half
    both["margin"] = [cmp.margin_of((1 / m, m), (lo, hi)) for m, lo, hi in zip(both.margin, both.aa_low, both.aa_high)]
    both["ratio"] = np.exp(both.study_mean - both["mean"])
    both["place"] = np.select([both.low.isna(), both.study_mean > both.high, both.study_mean < both.low],
                              ["none", "above", "below"], "inside")
    judged = [_judge(r) for _, r in both.iterrows()]  # none where the study shares no configuration with the pool
    both["verdict"], both["reason"] = [v for v, _ in judged], [why for _, why in judged]
    return both.drop(columns=["aa_low", "aa_high"])


NO_PREDICTION = "no prediction interval for this kind's hosts"
POOL_WIDE = "the pool's prediction interval is too wide"


def _judge(r: pd.Series) -> tuple[str, str | None]:
    """(verdict, reason) of one placed cell (module docstring)."""
    if r.study_n < MIN_N:
        return "inconclusive", f"n < {MIN_N}"
    if not np.isfinite(r.low):
        return "inconclusive", NO_PREDICTION
    beyond = np.log(r.margin) if np.isfinite(r.margin) else 0.0
    if r.study_mean > r.high + beyond or r.study_mean < r.low - beyond:
        return ("differs (faster)" if r.study_mean > r.high else "differs (slower)"), None
    tolerance = np.log(max(cmp.TOLERANCE, r.margin if np.isfinite(r.margin) else 1.0))
    if r.high - r["mean"] <= tolerance:
        return "reproduced", None
    return "inconclusive", POOL_WIDE


def entry(found: dict[str, cmp.Study]) -> dict:
    """One kind's pool as host-effect.json holds it: its studies and every cell of theirs (CELL and `study`)."""
    frames = [cells_of(s.records).assign(study=name) for name, s in sorted(found.items())]
    cells = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*CELL, "study"])
    rows = [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in cells.to_dict("records")]
    return {"studies": sorted(found), "method": METHOD, "cells": rows}


def ratios(stored: dict, kind: str | None, precision: str = "bf16", regime: str = "static") -> dict[tuple, dict]:
    """The kind's pool (every stored study of it) per configuration of one precision and regime, (batch, mode,
    scope) -> the pooled speedup and its prediction interval for a new host as ratios (None without one), the
    studies pooled (k) and the pool's verdict against eager: what the project README prints beside a study's own."""
    rows = pooled(members(stored, kind))
    rows = rows[(rows.precision == precision) & (rows.shape_regime == regime)] if len(rows) else rows
    return {(int(r.batch_size), r.compile_mode, r.compile_scope):
            {"speedup": float(np.exp(r.mean)), "k": int(r.k), "verdict": r.verdict,
             "low": float(np.exp(r.pi_low)) if np.isfinite(r.pi_low) else None,
             "high": float(np.exp(r.pi_high)) if np.isfinite(r.pi_high) else None}
            for r in rows.itertuples()}
