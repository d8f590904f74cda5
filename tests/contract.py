"""summary.csv as the paper reads it, from a summary made before intervals carried their method.

`adapt` derives the interval columns (`speedup_low`, `_high`, `_method`, `_n`; the same for `gain` and
`inference`; the A/A band `aa_low`, `aa_high`, `aa_method`; `real_mfu`) from the older columns
(`speedup_ci_low`, `aa_band`, ...). A summary that already has them is returned unchanged.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _method(n_ok: int) -> str:
    return "single run" if n_ok < 2 else "n = 2, range" if n_ok == 2 else f"n = {n_ok}, range"


def adapt(summary: pd.DataFrame) -> pd.DataFrame:
    if "speedup_low" in summary:
        return summary
    s = summary.copy()
    method = s.n_ok.fillna(0).astype(int).map(_method)
    for prefix, old in (("speedup", "speedup_ci"), ("gain", "gain_ci"), ("inference", "inference_speedup_ci")):
        s[f"{prefix}_low"], s[f"{prefix}_high"] = s.get(f"{old}_low", np.nan), s.get(f"{old}_high", np.nan)
        s[f"{prefix}_method"] = method
        s[f"{prefix}_n"] = s.n_ok
    s["aa_low"], s["aa_high"] = 1 / s.aa_band, s.aa_band
    s["aa_method"] = "largest eager ratio and its range, n = " + s.n_ok.astype(str)
    s["real_mfu"] = pd.to_numeric(s.get("real_tflops", pd.Series(np.nan, index=s.index)), errors="coerce") / s.peak_tflops
    return s
