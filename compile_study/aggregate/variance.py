"""How much of the step's spread between processes the host's recorded state explains (the appendix's paragraph).

    explained(records, config=summary.CONFIG) -> {"spread": ..., "recorded": [...], "fit": ...}

Processes of one configuration run the same code on the same batches, yet their median steps differ (eager on
the stored GPU study's dynamic batches at 256: 9.1 to 13.1 ms over three processes). Each record's
steady-state block carries the GPU's SM and memory clocks, temperature and power and the CPU's frequency
(record.HOST, measured by measure/process/hostwatch.py). The method: a least-squares fit of the log median step on those
quantities, every variable taken about its configuration's mean (configuration fixed effects), so that only
the spread between processes of one configuration is explained, not the differences between configurations.
R² is the share of that within-configuration variance the fit explains; the adjusted R² charges it for the
quantities fitted (with few processes per configuration, k quantities explain about k / (n - g) by chance).
A quantity that never varies within a configuration explains nothing and is left out (named as constant).
Records from before these readings (schema < 5) hold none: `recorded` is empty and there is no fit.
Power follows the step as much as it sets it (a faster step draws more), so the fit says how much varies
together, not what causes what. Beside the fit, `compiled`: why the default mode's speedup at the largest static
batch spreads between its processes, from the evidence its records hold (aggregate/spread.py paper_case).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from compile_study.aggregate import spread

# record.HOST's readings of the GPU's and the CPU's state, in the order the paper names them
QUANTITIES = ("gpu_sm_clock_mhz", "gpu_memory_clock_mhz", "gpu_temperature_c", "gpu_power_w", "cpu_mhz")
CONSTANT = 1e-12  # within-configuration variance below which a quantity counts as constant


def widest_spread(ok: pd.DataFrame, config: list[str]) -> dict | None:
    """Among the eager (module) configurations with two or more processes, the one whose median steps spread
    widest (max / min): its keys, its lowest and highest step and its processes."""
    eager = ok[(ok.compile_mode == "eager") & (ok.compile_scope == "module")]
    best = None
    for key, g in eager.groupby(config, sort=True):
        steps = pd.to_numeric(g.steady_step_ms, errors="coerce").dropna()
        if len(steps) >= 2 and (best is None or steps.max() / steps.min() > best["high"] / best["low"]):
            best = {c: v.item() if hasattr(v, "item") else v for c, v in zip(config, key)}  # numpy -> JSON
            best |= {"low": float(steps.min()), "high": float(steps.max()), "n": len(steps)}
    return best


def _within(frame: pd.DataFrame, groups: pd.Series) -> pd.DataFrame:
    return frame - frame.groupby(groups).transform("mean")


def fit(y: pd.Series, x: pd.DataFrame, groups: pd.Series) -> dict | None:
    """Least squares of y on x, both about their group means -> R², adjusted R², n, groups, quantities; None
    where no degree of freedom is left or nothing varies."""
    yw, xw = _within(y.to_frame(), groups).iloc[:, 0].to_numpy(), _within(x, groups).to_numpy()
    n, g, k = len(y), groups.nunique(), x.shape[1]
    total = float(yw @ yw)
    if k == 0 or n - g - k < 1 or total <= CONSTANT:
        return None
    beta, *_ = np.linalg.lstsq(xw, yw, rcond=None)
    residual = yw - xw @ beta
    r2 = 1 - float(residual @ residual) / total
    adjusted = 1 - (1 - r2) * (n - g) / (n - g - k)
    return {"r2": r2, "adjusted_r2": adjusted, "n": n, "configurations": g, "k": k}


def explained(records: pd.DataFrame, config: list[str]) -> dict:
    """The widest eager spread and the fit of the log step on the recorded quantities (module docstring)."""
    ok = records[records.status == "ok"].copy()
    out = {"spread": widest_spread(ok, config), "recorded": [], "constant": [], "fit": None,
           "compiled": spread.paper_case(records)}
    ok["log_step"] = np.log(pd.to_numeric(ok.steady_step_ms, errors="coerce"))
    recorded = [q for q in QUANTITIES if pd.to_numeric(ok[f"host_{q}"], errors="coerce").notna().any()]
    rows = ok.dropna(subset=["log_step"] + [f"host_{q}" for q in recorded])
    if not recorded or rows.empty:
        return out
    groups = rows[config].astype(str).agg("|".join, axis=1)
    x = rows[[f"host_{q}" for q in recorded]].apply(pd.to_numeric).set_axis(recorded, axis=1)
    varies = (_within(x, groups) ** 2).sum() > CONSTANT
    out |= {"recorded": recorded, "constant": [q for q in recorded if not varies[q]]}
    out["fit"] = fit(rows.log_step, x.loc[:, varies], groups)
    return out
