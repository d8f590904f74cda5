"""Every comparison the paper words, decided once from summary.csv by the rule of core/stats.py: the rankings
(the group a recommendation may name, which pairs in it the rule still orders, which lie below, which ran too
few processes), the batch trend per mode, the precisions, the method checks' verdicts against their band, and the
step graph's speedup split into the CUDA graph's and the compiler's (graph_split).

    decisions = decide(summary, checks)   # rule summarize writes it as decisions.json; the report only reads it

A configuration is named by its key, {"mode", "scope", "regime", "precision", "batch"}, the summary row's
compile_mode, compile_scope, shape_regime, precision and batch_size.
"""

from __future__ import annotations

import json
import math
import re
import statistics

import numpy as np
import pandas as pd

from compile_study.aggregate import paper_claims
from compile_study.aggregate.columns import interval_of, key
from compile_study.core import digits, stats, vocab
from compile_study.core.intervals import NAN

RULES = {"level": stats.LEVEL, "min_n": stats.MIN_N, "band_sds": stats.BAND_SDS}
# what each ranking orders: the quantity (summary.csv's interval prefix) and the configurations it takes, per
# precision and batch size
RANKINGS = {
    "speedup": "static shapes, the scopes one trains with (vocab.TRAINING_SCOPES), compiled, by speedup",
    "speedup-module": "static shapes, the module compiled, by speedup",
    "gain": "every compiled regime of the module where more than static shapes ran, by gain",
}
MODE_ORDER = {m: i for i, m in enumerate(vocab.COMPILE_MODES)}
SCOPE_ORDER = {s: i for i, s in enumerate(vocab.COMPILE_SCOPES)}


def ordered(df: pd.DataFrame, *first: str) -> pd.DataFrame:
    """Rows sorted by the given columns, then mode and scope in the vocabulary's order (stable)."""
    if len(df) < 2:
        return df
    keys = [pd.factorize(df[c], sort=True)[0] for c in first]  # each column's values as their rank
    keys += [df.compile_mode.map(MODE_ORDER).to_numpy(), df.compile_scope.map(SCOPE_ORDER).to_numpy()]
    return df.iloc[np.lexsort(keys[::-1])]  # lexsort: the last key sorts first


def _compiled(df: pd.DataFrame) -> pd.DataFrame:
    return df[df.compile_mode != "eager"]


def ranking(rows: pd.DataFrame, prefix: str) -> dict:
    """The comparison rule over some configurations (in the order given): `top` (the group stats.top picks, best
    first: what a recommendation may name, "any of these" where it holds several), `apart` (within top, each one
    that some others of top are measurably above, with those), `below` (each measurably below every member of
    top) and `few` (fewer than MIN_N processes: named, not ranked)."""
    ivs = [(key(r), interval_of(r, prefix)) for _, r in rows.iterrows()]
    by = {tuple(k.values()): (k, iv) for k, iv in ivs}
    first, below = stats.top({tuple(k.values()): iv for k, iv in ivs})
    top, under = [by[k] for k in first], [by[k] for k in below]
    apart = [{"lower": k, "above": [h for h, hiv in top if stats.compare(hiv, iv) == "higher"]} for k, iv in top]
    return {"top": [k for k, _ in top], "below": [k for k, _ in under],
            "few": [k for k, iv in ivs if iv.n < stats.MIN_N], "apart": [a for a in apart if a["above"]]}


def _static(summary: pd.DataFrame, scopes) -> pd.DataFrame:
    s = vocab.usable(summary[(summary.shape_regime == "static") & summary.compile_scope.isin(scopes)])
    return _compiled(s)


def rankings(summary: pd.DataFrame) -> list[dict]:
    """Every ranking of RANKINGS, per precision and batch size."""
    out = []
    for by, scopes in (("speedup", vocab.TRAINING_SCOPES), ("speedup-module", ("module",))):
        for (p, b), g in _static(summary, scopes).groupby(["precision", "batch_size"]):
            out.append({"by": by, "precision": p, "batch": int(b)} | ranking(ordered(g), "speedup"))
    module = vocab.usable(summary[summary.compile_scope == "module"])
    for (p, b), g in module.groupby(["precision", "batch_size"]):
        if (g.shape_regime == "static").all():
            continue
        gains = _compiled(g).dropna(subset=["gain_over_eager_static"])
        gains = gains.sort_values("gain_over_eager_static", ascending=False, kind="stable")
        out.append({"by": "gain", "precision": p, "batch": int(b)} | ranking(gains, "gain"))
    return out


def find(ranks: list[dict], by: str, precision: str) -> list[dict]:
    """The rankings of one kind and precision, by batch size."""
    return sorted((r for r in ranks if r["by"] == by and r["precision"] == precision), key=lambda r: r["batch"])


def _row(summary: pd.DataFrame, k: dict) -> pd.Series:
    s = summary
    return s[(s.compile_mode == k["mode"]) & (s.compile_scope == k["scope"]) & (s.shape_regime == k["regime"])
             & (s.precision == k["precision"]) & (s.batch_size == k["batch"])].iloc[0]


def comparisons(summary: pd.DataFrame, ranks: list[dict]) -> list[dict]:
    """The comparisons the main text makes beside the rankings, each a stats.compare code of `a` against `b`:
    per precision and compiled mode of the module measured at both the smallest and the largest batch size, its
    speedup at the one against the other (`batch-trend`: a trend sentence holds only where every one agrees); per mode
    and batch size measured in several precisions, the slower precision's step time against the faster one's
    (`precision`: "higher" means the slow one's step is measurably longer)."""
    out = []
    module = _static(summary, ("module",))
    for p in sorted(set(r["precision"] for r in ranks)):
        mine = module[module.precision == p]
        sizes = sorted(set(mine.batch_size))
        for mode in sorted(set(mine.compile_mode), key=MODE_ORDER.get) if len(sizes) >= 2 else []:
            ends = [mine[(mine.compile_mode == mode) & (mine.batch_size == b)] for b in (sizes[0], sizes[-1])]
            if all(len(e) for e in ends):
                a, b = key(ends[0].iloc[0]), key(ends[1].iloc[0])
                out.append({"what": "batch-trend", "by": "speedup", "a": a, "b": b, "code": _code(summary, a, b, "speedup")})
    head = _compiled(vocab.usable(vocab.headline(summary)))
    for (mode, b), g in head.groupby(["compile_mode", "batch_size"]):
        if g.precision.nunique() < 2:
            continue
        rows = sorted((r for _, r in g.iterrows()), key=lambda r: interval_of(r, "step").point)
        fast, slow = key(rows[0]), key(rows[-1])
        out.append({"what": "precision", "by": "step", "a": slow, "b": fast, "code": _code(summary, slow, fast, "step")})
    return out


def _code(summary: pd.DataFrame, a: dict, b: dict, prefix: str) -> str:
    return stats.compare(interval_of(_row(summary, a), prefix), interval_of(_row(summary, b), prefix))


def _num(v) -> float | None:
    """A JSON-safe number: NaN -> None."""
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def interval_json(iv: stats.Interval) -> dict:
    return {"point": _num(iv.point), "low": _num(iv.low), "high": _num(iv.high), "method": iv.method, "n": iv.n,
            "level": _num(iv.level)}


def _band(summary: pd.DataFrame, mode: str, check: dict) -> stats.Band | None:
    """The study's A/A band of the check's cell (read from the row of `mode` there), None where it has none."""
    s = summary
    cell = s[(s.compile_mode == mode) & (s.compile_scope == "module") & (s.shape_regime == check["shape_regime"])
             & (s.precision == check["precision"]) & (s.batch_size == check["batch_size"])]
    if not len(cell) or not math.isfinite(float(cell.aa_low.iloc[0])):  # a cell with no eager runs has no band
        return None
    return stats.Band(cell.aa_low.iloc[0], cell.aa_high.iloc[0], stats.NAN, stats.NAN, int(cell.aa_n.iloc[0]))


def check_code(iv: stats.Interval, band: stats.Band) -> str:
    """A method check's verdict: stats.verdict, but an interval that overlaps the band and is wider than it on both
    sides is "underpowered" (it can show neither agreement nor a difference as large as the noise), not
    "indistinct"."""
    code = stats.verdict(iv, band)
    return "underpowered" if code == "indistinct" and iv.low < band.low and iv.high > band.high else code


def check_verdict(check: dict, summary: pd.DataFrame, mode: str) -> dict | None:
    """A method check's ratios (one per round) as an interval, read against the A/A band of its cell as a
    speedup is (check_code); None where the check did not apply."""
    if not check.get("applicable"):
        return None
    iv = stats.speedup_interval(r["ratio"] for r in check["results"])
    band = _band(summary, mode, check)
    return {"interval": interval_json(iv), "rounds": len(check["results"]),
            "band": [_num(band.low), _num(band.high)] if band else None,
            "verdict": check_code(iv, band) if band else None}


def _round_ratios(r: dict) -> list[float]:
    """A timer check row's harness / Timer ratio in each of its rounds."""
    return [h / t for h, t in zip(r.get("harness_rounds_ms") or [], r.get("timer_rounds_ms") or []) if h and t]


def timer_disagreements(rows: list[dict], summary: pd.DataFrame) -> list[dict]:
    """The timer check's compiled rows outside its 3% target, each with what it means for the configuration's
    speedup. The harness reads the compiled step `ratio` of Timer's and eager's `eager_ratio`, so the speedup may
    read eager_ratio / ratio too high: a correction only where the check timed eager at the same batch size and
    precision (`corrected`; elsewhere none is made). With it: the speedup interval divided by that factor and its
    verdict against the cell's band; each side's per-round ratios (`spread`: min, max), and the check's harness
    step against the configuration's step interval across the study's processes (`step`, `step_code`: inside or
    outside), since the check times one batch in a process of its own."""
    eager = {(r["batch_size"], r["precision"]): r for r in rows if r["compile_mode"] == "eager"}
    out = []
    for r in rows:
        if r["compile_mode"] == "eager" or r.get("within_3pct", True):
            continue
        cell = {"compile_mode": r["compile_mode"], "shape_regime": "static", "precision": r["precision"],
                "batch_size": r["batch_size"]}
        band, match = _band(summary, r["compile_mode"], cell), _rows_of(summary, cell)
        if band is None or match.empty:
            continue
        row, e = match.iloc[0], eager.get((r["batch_size"], r["precision"]))
        step = interval_of(row, "step")
        found = {"config": key(row), "ratio": r["harness_vs_timer"], "eager_ratio": e["harness_vs_timer"] if e else None,
                 "rounds": r.get("rounds"), "spread": _span(_round_ratios(r)),
                 "eager_spread": _span(_round_ratios(e)) if e else None, "verdict": row.verdict,
                 "harness_ms": r.get("harness_median_ms"), "step": interval_json(step),
                 "step_code": ("inside" if step.low <= r.get("harness_median_ms", NAN) <= step.high else "outside")
                 if math.isfinite(step.low) else "few-runs", "corrected": e is not None}
        if e is not None:
            iv, factor = interval_of(row), e["harness_vs_timer"] / r["harness_vs_timer"]
            moved = stats.Interval(iv.point / factor, iv.low / factor, iv.high / factor, iv.method, iv.n, iv.level)
            found |= {"factor": factor, "moved": interval_json(moved), "moved_verdict": stats.verdict(moved, band)}
        out.append(found)
    return out


def _span(values: list[float]) -> list[float] | None:
    return [min(values), max(values)] if values else None


def _rows_of(summary: pd.DataFrame, cell: dict) -> pd.DataFrame:
    """The module-scope row of a check's cell."""
    s = summary
    return s[(s.compile_mode == cell["compile_mode"]) & (s.compile_scope == "module") & (s.shape_regime == cell["shape_regime"])
             & (s.precision == cell["precision"]) & (s.batch_size == cell["batch_size"])]


def checks_decided(checks: dict, summary: pd.DataFrame) -> dict:
    """The concurrency check (two timed runs at once against one alone, read against eager's band) and the
    launcher check (the warm launcher's in-process speedup over a fresh process's, against its mode's band),
    with the medians their sentences quote."""
    out = {}
    concurrency = check_verdict(checks.get("concurrency") or {}, summary, "eager")
    if concurrency:
        overlaps = checks["concurrency"]["summary"]["overlaps"]
        out["concurrency"] = concurrency | {"overlap": [min(overlaps), max(overlaps)]}
    launcher = checks.get("launcher") or {}
    decided = check_verdict(launcher, summary, launcher.get("compile_mode"))
    if decided:
        fixed = {way: statistics.median(r["fixed_cost_s"][way] for r in launcher["results"]) for way in ("warm", "fresh")}
        out["launcher"] = decided | {"fixed_cost_s": fixed}
    timer = timer_disagreements((checks.get("timer_check") or {}).get("results", []), summary)
    if timer:
        out["timer"] = timer
    compiles = compile_concurrency(checks.get("compile_concurrency") or {})
    if compiles:
        out["compile_concurrency"] = compiles
    return out


def compile_concurrency(check: dict) -> dict | None:
    """The compile-concurrency check: a cold compile among k at once (c cores each) over the same compile alone,
    one ratio per round, as an interval read against 1 (no A/A band exists for compile times: the band is [1, 1])
    by the rule of every method check (check_code): "faster" here means the compile took longer among the others,
    "slower" that it took less, "underpowered" an interval that holds 1 (wider than the band on both sides);
    fewer than MIN_N rounds, "few-runs". None where the check did not apply (a host too small for two at once)."""
    if not check.get("applicable"):
        return None
    if "phase" in check:  # the phase's own compiles against n alone (today's check)
        among, alone = [p["cold_compile_s"] for p in check["phase"]], [a["cold_compile_s"] for a in check["alone"]]
        iv, rounds = stats.ratio_interval(among, alone), min(len(among), len(alone))
    else:  # a stored study's check of rounds, each alone once and k at once
        among = [statistics.median(r["batch_s"]) for r in check["results"]]
        alone = [r["alone_s"] for r in check["results"]]
        iv, rounds = stats.speedup_interval(r["ratio"] for r in check["results"]), len(check["results"])
    return {"interval": interval_json(iv), "rounds": rounds, "band": [1.0, 1.0],
            "verdict": check_code(iv, stats.Band(1.0, 1.0, 0.0, 0.0, 0)), "k": check["k"],
            "cores_per_compile": check["cores_per_compile"], "host_cores": check["host_cores"],
            "alone_s": statistics.median(alone), "batch_s": statistics.median(among)}


def graph_split(summary: pd.DataFrame) -> dict:
    """How much of each compiled step-graph configuration's speedup over eager is the CUDA graph's and how much the
    compiler's, where its control (eager-step-graph: the same step, eager model, same capture) ran at the same
    static cell: `graph`, the control's speedup over eager (a same-process ratio, t on log ratio across its
    processes); `compiler`, the step graph's speedup over the control's, the two sets of processes' per-process
    speedups as stats.ratio_of_intervals has them (Welch t on the log ratio); `total`, the step graph's own
    speedup, which the two multiply back to. `missing`: the step graph's configurations without a control."""
    s = vocab.usable(summary[summary.shape_regime == "static"])
    graphs = _compiled(s[s.compile_scope == "step-graph"])
    controls = s[(s.compile_scope == "eager-step-graph") & (s.compile_mode == "eager")]
    split, missing = [], []
    for _, r in ordered(graphs, "precision", "batch_size").iterrows():
        c = controls[(controls.precision == r.precision) & (controls.batch_size == r.batch_size)]
        if c.empty or not math.isfinite(float(c.speedup.iloc[0])) or not math.isfinite(float(r.speedup)):
            missing.append(key(r))
            continue
        total, graph = interval_of(r), interval_of(c.iloc[0])
        split.append({"step_graph": key(r), "control": key(c.iloc[0]), "total": interval_json(total),
                      "graph": interval_json(graph), "compiler": interval_json(stats.ratio_of_intervals(total, graph))})
    return {"split": split, "missing": missing}


def decide(summary: pd.DataFrame, checks: dict | None = None, claims: pd.DataFrame | None = None) -> dict:
    """decisions.json: the rule's constants, every ranking, the comparisons, the method checks' verdicts, the step
    graph's split and the paper's claims as records (aggregate/paper_claims.py; the common claims' from `claims`,
    claims.csv, where given).

    checks: the method checks' JSON by name ({"concurrency": ..., "launcher": ...}); absent ones are skipped."""
    summary = summary.copy()  # one block per dtype: a summary read column by column fragments when sorted
    ranks = rankings(summary)
    out = {"rules": RULES, "rankings": ranks, "comparisons": comparisons(summary, ranks),
           "checks": checks_decided(checks or {}, summary), "graph_split": graph_split(summary)}
    return out | {"claims": paper_claims.records(summary, out, claims)}


def to_json(decisions: dict) -> str:
    """decisions.json's text: indented, with each configuration (and each interval) on one line."""
    text = digits.dumps(decisions, indent=2)
    return re.sub(r"\{[^{}\[\]]*\}", lambda m: json.dumps(json.loads(m[0])), text) + "\n"
