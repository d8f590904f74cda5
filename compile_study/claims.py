"""Common claims about torch.compile, each checked against this study's own measurements.

    claims_table(summary, mlp, facts) -> DataFrame[claim, verdict, evidence]

Every verdict is computed here from the summary (and the MLP benchmark, mlp_claim.py), by the rule
written next to it; a claim the study did not measure gets "not measured", never a guess. Speedups
are in-process medians over repeats (summary.py); "faster" etc. are the A/A-band verdicts.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

NOT_MEASURED = "not measured"
TRAIN_CLAIM = (1.2, 1.4)  # "20-40% faster training"
INFERENCE_CLAIM = 1.6  # "inference up to 60% faster"
MLP_CLAIM = (1.2, 1.5)  # "the MLP example is 1.2-1.5x faster"


def _ok(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary.status.isin(["ok", "partial"])]


def _range(values) -> str:
    v = [x for x in values if isinstance(x, (int, float)) and math.isfinite(x)]
    if not v:
        return "—"
    lo, hi = f"{min(v):.2f}", f"{max(v):.2f}"
    return f"{lo}×" if lo == hi else f"{lo}–{hi}×"


def _x(value: float) -> str:
    return f"{value:.2f}×" if isinstance(value, (int, float)) and math.isfinite(value) else "not measured"


def _count_verdict(flags: pd.Series, what: str) -> str:
    """holds / does not hold / depends, with how many of the configurations showed `what`."""
    n, k = len(flags), int(flags.sum())
    return "holds" if k == n else "does not hold" if k == 0 else f"depends ({what} in {k} of {n})"


def _static_module(summary: pd.DataFrame) -> pd.DataFrame:
    s = _ok(summary)
    return s[(s.shape_regime == "static") & (s.compile_scope == "module")]


def training_claim(summary: pd.DataFrame) -> dict:
    """Holds if every default-mode speedup (static shapes) lies in 1.2-1.4x; does not hold if none does."""
    claim = "Training is 20–40% faster compiled (default mode)"
    s = _static_module(summary)
    default = s[s.compile_mode == "default"].dropna(subset=["speedup"])
    if default.empty:
        return {"claim": claim, "verdict": NOT_MEASURED, "evidence": "no default-mode run with static shapes"}
    lo, hi = TRAIN_CLAIM
    inside = default.speedup.between(lo, hi)
    verdict = _count_verdict(inside, "within 1.2–1.4×")
    parts = [f"default: {_range(default.speedup)} over {len(default)} configurations ({int(inside.sum())} within 1.2–1.4×)"]
    for mode in sorted(set(s.compile_mode) - {"eager", "default"}):
        parts.append(f"{mode}: {_range(s[s.compile_mode == mode].speedup)}")
    by_bs = default.groupby("batch_size").speedup.median()
    parts.append("default by batch size: " + ", ".join(f"{int(b)}: {v:.2f}×" for b, v in by_bs.items()))
    return {"claim": claim, "verdict": verdict, "evidence": "; ".join(parts)}


def inference_claim(summary: pd.DataFrame) -> dict:
    """Holds if the best default-mode inference speedup reaches 1.6x; partly if it lies in 1.2-1.6x."""
    claim = "Inference is up to 60% faster compiled"
    s = _static_module(summary)
    s = s[(s.compile_mode != "eager")].dropna(subset=["inference_speedup"])
    default = s[s.compile_mode == "default"]
    if default.empty:
        return {"claim": claim, "verdict": NOT_MEASURED, "evidence": "no default-mode inference measurement"}
    best = default.loc[default.inference_speedup.idxmax()]
    v = best.inference_speedup
    verdict = "holds" if v >= INFERENCE_CLAIM else ("partly" if v >= TRAIN_CLAIM[0] else "does not hold")
    parts = [f"default: {_range(default.inference_speedup)}, best {v:.2f}× at batch {int(best.batch_size)} "
             f"({best.precision})"]
    for mode in sorted(set(s.compile_mode) - {"default"}):
        parts.append(f"{mode}: {_range(s[s.compile_mode == mode].inference_speedup)}")
    train = default.set_index(["precision", "batch_size"]).speedup
    inf = default.set_index(["precision", "batch_size"]).inference_speedup
    parts.append(f"inference above training speedup in {int((inf > train).sum())} of {len(inf)} configurations")
    return {"claim": claim, "verdict": verdict, "evidence": "; ".join(parts)}


def mlp_claim(mlp: dict | None) -> dict:
    """Holds if the synchronised, warmed-up speedup at the example's batch (64) lies in 1.2-1.5x."""
    claim = "The two-layer MLP example (1024→4096→1024, batch 64, SGD, MSE, timeit over 100 steps) is 1.2–1.5× faster"
    rows = [r for r in (mlp or {}).get("rows", []) if r.get("status") == "ok"]
    if not rows:
        return {"claim": claim, "verdict": NOT_MEASURED, "evidence": "the MLP benchmark did not run"}
    example = next((r for r in rows if r["batch_size"] == 64), None)
    lo, hi = MLP_CLAIM
    verdict = NOT_MEASURED if example is None else ("holds" if lo <= example["proper_speedup"] <= hi else "does not hold")
    parts = [
        f"batch {r['batch_size']}: timeit unsynchronised {r['warm_ratio']:.2f}× (cold, compile included: "
        f"{r['cold_ratio']:.2f}×); synchronised and warmed up {r['proper_speedup']:.2f}× "
        f"({r['proper_eager_ms']:.3f} vs {r['proper_compiled_ms']:.3f} ms/step)"
        for r in sorted(rows, key=lambda r: r["batch_size"])
    ]
    return {"claim": claim, "verdict": verdict, "evidence": "; ".join(parts)}


def dynamic_claim(summary: pd.DataFrame) -> dict:
    """Per mode and batch size: graphs vs distinct shapes, and the dynamic speedup next to the static one.

    Holds where a regime compiles about one graph per shape or hits the recompile limit and is not
    faster than eager; does not hold where automatic dynamic shapes (dynamic=None, the default) keep
    the graph count small and stay faster; "depends" when both are seen.
    """
    claim = "Dynamic shapes force a recompilation for every new shape and can erase the gain"
    s = _ok(summary)
    s = s[(s.compile_mode != "eager") & (s.compile_scope == "module")]
    dyn = s[s.shape_regime.str.startswith("dynamic")]
    if dyn.empty:
        return {"claim": claim, "verdict": NOT_MEASURED, "evidence": "no dynamic-shape run"}
    static = s[s.shape_regime == "static"].set_index(["compile_mode", "precision", "batch_size"]).speedup
    holds, fails, parts = [], [], []
    for _, r in dyn.sort_values(["batch_size", "compile_mode", "shape_regime"]).iterrows():
        per_shape = r.graphs_compiled >= 0.5 * r.distinct_shapes or bool(r.recompile_limit_hit)
        erased = r.verdict != "faster"
        (holds if per_shape and erased else fails).append(r.shape_regime)
        ref = static.get((r.compile_mode, r.precision, r.batch_size), np.nan)
        limit = f", recompile limit hit ({int(r.eager_fallback_steps)} eager steps)" if r.recompile_limit_hit else ""
        gain = f"; {r.gain_over_eager_static:.2f}× eager-static tokens/s" if math.isfinite(r.gain_over_eager_static) else ""
        parts.append(f"{r.compile_mode} {r.shape_regime} bs{int(r.batch_size)}: {int(r.graphs_compiled)} graphs for "
                     f"{int(r.distinct_shapes)} shapes{limit}, {r.speedup:.2f}× over eager (static: {_x(ref)}){gain}")
    verdict = "holds" if not fails else ("does not hold" if not holds else
                                         f"depends (holds for {', '.join(sorted(set(holds)))})")
    return {"claim": claim, "verdict": verdict, "evidence": "; ".join(parts)}


def forward_only_claim(summary: pd.DataFrame) -> dict:
    """'Compile only the forward; the backward gains less': the forward/backward scopes against the module
    scope, and the per-phase speedups of the module scope (eager reference phase / compiled phase).

    Holds if, in every configuration measured, the backward phase gains less than the forward phase.
    """
    claim = "Compile only the forward: the backward gains less"
    s = _ok(summary)
    s = s[(s.compile_mode == "default") & (s.shape_regime == "static")]
    module = s[s.compile_scope == "module"].dropna(subset=["forward_speedup", "backward_speedup"])
    if module.empty:
        return {"claim": claim, "verdict": NOT_MEASURED, "evidence": "no phase split of a compiled module"}
    less = module.backward_speedup < module.forward_speedup
    verdict = _count_verdict(less, "the backward gains less")
    parts = []
    for _, r in module.sort_values(["precision", "batch_size"]).iterrows():
        key = (r.precision, r.batch_size)
        by_scope = s[(s.precision == key[0]) & (s.batch_size == key[1])].set_index("compile_scope").speedup
        scopes = ", ".join(f"{sc} {by_scope[sc]:.2f}×" for sc in ("module", "forward", "backward", "step")
                           if sc in by_scope and math.isfinite(by_scope[sc]))
        parts.append(f"bs{int(r.batch_size)} {r.precision}: phases forward {r.forward_speedup:.2f}×, backward "
                     f"{r.backward_speedup:.2f}×; whole step by scope: {scopes}")
    return {"claim": claim, "verdict": verdict, "evidence": "; ".join(parts)}


def break_even_claim(summary: pd.DataFrame, facts: dict) -> dict:
    """Holds for runs shorter than the break-even; the epochs that takes on this train split are stated."""
    claim = "The first compilation costs more than it saves on short runs"
    s = _static_module(summary)
    s = s[(s.compile_mode != "eager")].dropna(subset=["break_even_steps"])
    if s.empty:
        return {"claim": claim, "verdict": NOT_MEASURED, "evidence": "no cold compile measured"}
    rows = facts["splits"]["train"]["rows"]
    parts = []
    for mode, g in s.groupby("compile_mode"):
        finite = g[np.isfinite(g.break_even_steps)]
        never = len(g) - len(finite)
        if len(finite):
            epochs = finite.break_even_steps * finite.batch_size / rows
            parts.append(f"{mode}: {finite.break_even_steps.min():,.0f}–{finite.break_even_steps.max():,.0f} steps "
                         f"({epochs.min():.1f}–{epochs.max():.1f} epochs of the {rows:,}-row train split)"
                         + (f"; never in {never}" if never else ""))
        else:
            parts.append(f"{mode}: never pays back ({never} configurations)")
    return {"claim": claim, "verdict": "holds for runs shorter than the break-even", "evidence": "; ".join(parts)}


def claims_table(summary: pd.DataFrame, mlp: dict | None, facts: dict) -> pd.DataFrame:
    rows = [training_claim(summary), inference_claim(summary), mlp_claim(mlp), dynamic_claim(summary),
            forward_only_claim(summary), break_even_claim(summary, facts)]
    return pd.DataFrame(rows, columns=["claim", "verdict", "evidence"])
