"""Common claims about torch.compile, each judged from this study's own measurements: codes and numbers.

    claims_table(summary, mlp, facts) -> DataFrame[claim, verdict, evidence]

`claim` is the claim's id (CLAIMS; the paper's template `claims.j2` states each one), `verdict` a code of
VERDICTS, `evidence` a JSON list of the numbers the verdict rests on (one object per configuration, with a
code saying where that configuration stands). No sentence is written here.

One rule for every claim: a configuration decides a claim only with an interval across at least
stats.MIN_N processes (or, for the MLP example, rounds alternating in one process); "holds" / "does-not-hold"
need every deciding configuration on one side, "depends" means they disagree, "not-enough-evidence" means
none decides (fewer processes, or intervals that straddle the claim's bound), "not-measured" that the study
has no such run. Epochs are epochs of the training rows the runs used (facts.json).
"""

from __future__ import annotations

import math

import pandas as pd

from compile_study.aggregate.columns import interval_of, key
from compile_study.core import digits, stats, vocab
from compile_study.core.dataset.data import steps_per_epoch

CLAIMS = ("training", "inference", "mlp", "dynamic", "forward", "short-runs")
VERDICTS = ("holds", "does-not-hold", "depends", "not-enough-evidence", "not-measured")
TRAIN_CLAIM = (1.2, 1.4)  # "20-40% faster training"
INFERENCE_CLAIM = 1.6  # "inference up to 60% faster"
MLP_CLAIM = (1.2, 1.5)  # "the MLP example is 1.2-1.5x faster"
ERASED = ("within-noise", "indistinct", "slower")  # verdicts of a compiled configuration that is no gain over eager


def _num(v) -> float | None:
    """A JSON-safe number (NaN -> None; inf stays a float, written as Infinity)."""
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


_iv = interval_of  # a summary row's interval (aggregate/columns.py names its columns)


def _iv_json(iv: stats.Interval) -> dict:
    return {"point": _num(iv.point), "low": _num(iv.low), "high": _num(iv.high), "n": iv.n}


def _decided(iv: stats.Interval) -> bool:
    return iv.n >= stats.MIN_N and math.isfinite(iv.low) and math.isfinite(iv.high)


def _band_code(iv: stats.Interval, lo: float, hi: float) -> str:
    """Where an interval lies against the claimed range [lo, hi]."""
    if not _decided(iv):
        return "few-runs"
    if lo <= iv.low and iv.high <= hi:
        return "inside"
    if iv.high < lo or iv.low > hi:
        return "outside"
    return "straddles"


def _verdict(codes: list[str], yes: str, no: str) -> str:
    """holds when every configuration with MIN_N processes or more says `yes`, does-not-hold when every one
    says `no`, depends when they disagree; anything else (none, or intervals straddling) is not enough."""
    if not codes:
        return "not-measured"
    found = {c for c in codes if c != "few-runs"}
    if {yes, no} <= found:
        return "depends"
    if found == {yes}:
        return "holds"
    if found == {no}:
        return "does-not-hold"
    return "not-enough-evidence"


def _static_module(summary: pd.DataFrame) -> pd.DataFrame:
    return vocab.usable(vocab.headline(summary))


def training_claim(summary: pd.DataFrame) -> tuple[str, list[dict]]:
    """Per default-mode configuration (static shapes, the module): its speedup interval inside, outside or
    straddling 1.2-1.4x."""
    s = _static_module(summary)
    rows = s[s.compile_mode == "default"].dropna(subset=["speedup"]).sort_values(["precision", "batch_size"])
    ev = [key(r) | _iv_json(_iv(r)) | {"code": _band_code(_iv(r), *TRAIN_CLAIM)} for _, r in rows.iterrows()]
    return _verdict([e["code"] for e in ev], "inside", "outside"), ev


def inference_claim(summary: pd.DataFrame) -> tuple[str, list[dict]]:
    """Per default-mode configuration: does its inference speedup interval reach 1.6x (and lie above 1)?
    Holds if one does; does not hold if every deciding interval ends below 1.6x."""
    s = _static_module(summary)
    rows = s[s.compile_mode == "default"].dropna(subset=["inference_speedup"]).sort_values(["precision", "batch_size"])
    ev = []
    for _, r in rows.iterrows():
        iv = _iv(r, "inference")
        code = "few-runs" if not _decided(iv) else (
            "reaches" if iv.high >= INFERENCE_CLAIM and iv.low > 1 else "below" if iv.high < INFERENCE_CLAIM else "straddles")
        ev.append(key(r) | _iv_json(iv) | {"code": code})
    codes = [e["code"] for e in ev]
    if "reaches" in codes:
        return "holds", ev
    return _verdict(codes, "reaches", "below"), ev


def mlp_claim(mlp: dict | None) -> tuple[str, list[dict]]:
    """The MLP example at its published batch (64): synchronised, warmed-up rounds alternating eager and
    compiled in one process; their ratios' t interval inside or outside 1.2-1.5x. The published
    (unsynchronised timeit) ratio is given beside it."""
    rows = [r for r in (mlp or {}).get("rows", []) if r.get("status") == "ok"]
    ev = []
    for r in sorted(rows, key=lambda r: r["batch_size"]):
        rounds = r.get("proper_rounds") or {}
        iv = stats.speedup_interval([e / c for e, c in zip(rounds.get("eager_ms", []), rounds.get("compiled_ms", []))])
        ev.append({"batch": r["batch_size"], "timeit_ratio": _num(r["warm_ratio"]), "cold_ratio": _num(r["cold_ratio"]),
                   "eager_ms": _num(r["proper_eager_ms"]), "compiled_ms": _num(r["proper_compiled_ms"])}
                  | _iv_json(iv) | {"code": _band_code(iv, *MLP_CLAIM) if r["batch_size"] == 64 else "other-batch"})
    codes = [e["code"] for e in ev if e["batch"] == 64]
    return _verdict(codes, "inside", "outside") if codes else "not-measured", ev


def dynamic_claim(summary: pd.DataFrame) -> tuple[str, list[dict]]:
    """"Dynamic shapes can erase the gain", judged by the rule on each dynamic-shape configuration's speedup over
    eager on the same batches: the gain is erased ("holds") where its verdict is not "faster" (within noise, not
    distinguishable from eager, or slower), kept ("fails") where it is faster; without a verdict, "few-runs". The
    graphs compiled for the distinct shapes and the cold start are quoted beside it, not judged."""
    s = vocab.usable(summary)
    s = s[(s.compile_mode != "eager") & (s.compile_scope == "module")]
    dyn = s[pd.Series([vocab.Regime.parse(x).is_dynamic for x in s.shape_regime], index=s.index, dtype=bool)]
    ev = []
    for _, r in dyn.sort_values(["batch_size", "compile_mode", "shape_regime"]).iterrows():
        iv = _iv(r)
        code = ("few-runs" if not _decided(iv) or r.verdict not in ERASED + ("faster",) else
                "holds" if r.verdict in ERASED else "fails")
        ev.append(key(r) | _iv_json(iv) | {"graphs": _num(r.graphs_compiled), "shapes": _num(r.distinct_shapes),
                                            "limit_hit": bool(r.recompile_limit_hit), "verdict": r.verdict,
                                            "cold_start_s": _num(r.cold_start_s), "code": code})
    return _verdict([e["code"] for e in ev], "holds", "fails"), ev


def forward_claim(summary: pd.DataFrame) -> tuple[str, list[dict]]:
    """"Compile only the forward: the backward gains less": the module's phase speedups (eager reference phase /
    compiled phase) come from one process per configuration (the evidence pass), so they decide nothing;
    the forward-only scope's speedup interval is quoted beside them, with the aot-eager baseline's."""
    s = vocab.usable(summary)
    s = s[(s.compile_mode == "default") & (s.shape_regime == "static")]
    module = s[s.compile_scope == "module"].dropna(subset=["forward_speedup", "backward_speedup"])
    ev = []
    for _, r in module.sort_values(["precision", "batch_size"]).iterrows():
        scopes = s[(s.precision == r.precision) & (s.batch_size == r.batch_size)
                   & s.compile_scope.isin(("forward", "backward", "aot-eager"))]
        ev.append(key(r) | {"forward": _num(r.forward_speedup), "backward": _num(r.backward_speedup),
                             "phase_n": 1, "code": "few-runs",
                             "scopes": [key(o) | _iv_json(_iv(o)) | {"verdict": o.verdict} for _, o in scopes.iterrows()]})
    return ("not-enough-evidence" if ev else "not-measured"), ev


def short_runs_claim(summary: pd.DataFrame, facts: dict) -> tuple[str, list[dict]]:
    """A short run is one epoch of the training rows used. Per compiled static configuration: its break-even
    interval (summary.csv: cold compile over the time a step saves, from both sides' intervals) wholly above one
    epoch ("more"), wholly below ("less") or neither; a configuration that never pays back (its step is not
    faster) costs more on any run ("more"); without a break-even interval (fewer than MIN_N cold compiles or
    processes), "few-runs"."""
    rows_used = facts["splits"]["train"]["rows"]
    s = _static_module(summary)
    s = s[(s.compile_mode != "eager")].dropna(subset=["cold_start_s"])
    ev = []
    for _, r in s.sort_values(["precision", "batch_size"]).iterrows():
        be, epoch, never = _iv(r, "break_even"), steps_per_epoch(r.batch_size, rows_used), r.get("payback") == "never"
        code = ("more" if never else "few-runs" if not _decided(be) else
                "more" if be.low > epoch else "less" if be.high < epoch else "straddles")
        ev.append(key(r) | {"speedup": _iv_json(_iv(r)), "steps": _num(be.point), "steps_low": _num(be.low),
                            "steps_high": _num(be.high), "method": be.method, "epoch_steps": epoch, "never": bool(never),
                            "cold_start_s": _num(r.cold_start_s), "code": code,
                            "cold_n": int(r.cold_n) if _num(r.get("cold_n")) is not None else 0})
    return _verdict([e["code"] for e in ev], "more", "less"), ev


def claims_table(summary: pd.DataFrame, mlp: dict | None, facts: dict) -> pd.DataFrame:
    results = [training_claim(summary), inference_claim(summary), mlp_claim(mlp), dynamic_claim(summary),
               forward_claim(summary), short_runs_claim(summary, facts)]
    rows = [{"claim": c, "verdict": v, "evidence": digits.dumps(ev, sort_keys=True)} for c, (v, ev) in zip(CLAIMS, results)]
    return pd.DataFrame(rows, columns=["claim", "verdict", "evidence"])
