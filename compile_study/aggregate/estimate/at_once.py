"""How much longer a cold compile takes among the compile phase's others than alone, at k compiles at once, as the
estimate (estimate.py, costs.known_compiles) prices it. Torch-free.

The factor at a k comes from compile_concurrency checks (each: the phase's compiles of one configuration made k at
once against the same configuration compiled alone, n = 3 each): the stored studies' own and those kept in
benchmarks/compile-at-once/ (MEASURED_DIR: one H200 host, 2026-12-05, a176490, torch 2.11, the quick config's
compile phase with two cores per compile (k = 8: 1.38x [1.17, 1.62]) and with one (k = 16: 2.78x [2.19, 3.51]):
fifteen at once take twice as long each as eight, so the phase gains nothing from one core per compile). At a k
they measured, their median ratio; between two measured k, or between alone (1 at k = 1) and the least measured
k, a line between them; beyond the largest measured k, its excess over alone scaled by how the per-compile
slowdown grew with k in measurements outside the study (MEASURED_SLOWDOWN): (g(k) - 1) / (g(k_ref) - 1).

A compile's k is how many compiles ran at once while it ran, time-weighted over the time it held its compile slot
(mean_at_once, from the compile records' job windows): the compile phase's end and a search run alone leave some
with fewer than the phase's k. The paper's cold starts (payback.py) and the estimate (costs.py) both divide a
compile by the factor at its own k.
"""

from __future__ import annotations

import glob
import json
import statistics
from pathlib import Path

from compile_study.core.layout import Layout

# Until a study's compile_concurrency check says: 8 at once on 2 cores each took 19.9-25.1 s against 19.9-23.0 s
# alone (one H200 host, torch 2.11).
AT_ONCE = 1.15
# Checks kept outside the stored studies (their README says how they were made)
MEASURED_DIR = Path(__file__).resolve().parents[3] / "benchmarks" / "compile-at-once"
# k at once -> a compile's seconds over its seconds alone, outside the study (one H200 host, 16 cores, torch 2.11,
# the study's model, bf16 bs32 and bs512, default and reduce-overhead): alone 20.0 s on 4 cores and 19.9 s on 2
# (on 1 core taken as on 2: Inductor's compile of this model hardly uses more than one core); 4 at once on 4 cores
# each 21.9-24.3 s (midpoint 23.1), 8 on 2 cores 19.9-25.1 s (midpoint 22.5), 16 on 1 core median ~25 s. Where
# checks measured a k (MEASURED_DIR: 2.78 at 16) they take precedence; this only shapes the slope beyond them.
MEASURED_SLOWDOWN = {1: 1.0, 4: 23.1 / 20.0, 8: 22.5 / 19.9, 16: 25.0 / 19.9}


def slowdown(k: float) -> float:
    """MEASURED_SLOWDOWN at k at once: linear between the measured k, beyond them along the last two."""
    ks = sorted(MEASURED_SLOWDOWN)
    if k <= ks[0]:
        return MEASURED_SLOWDOWN[ks[0]]
    lo, hi = next(((a, b) for a, b in zip(ks, ks[1:]) if k <= b), (ks[-2], ks[-1]))
    g_lo, g_hi = MEASURED_SLOWDOWN[lo], MEASURED_SLOWDOWN[hi]
    return g_lo + (g_hi - g_lo) * (k - lo) / (hi - lo)


def checks(references: str, device: str, kept: Path | None = None) -> dict[int, float]:
    """k at once -> the median ratio of the compile_concurrency checks on `device` that ran k at once (the stored
    studies' checks/compile_concurrency.json and those in `kept`: the estimate passes MEASURED_DIR); empty where none
    applied."""
    found: dict[int, list[float]] = {}
    paths = glob.glob(Layout(f"{references}/*").check("compile_concurrency")) + (glob.glob(f"{kept}/*.json") if kept else [])
    for path in sorted(paths):
        check = json.loads(Path(path).read_text())
        ratio = (check.get("summary") or {}).get("ratio")
        if check.get("applicable") and check.get("device") == device and ratio:
            found.setdefault(int(check.get("k") or 8), []).append(float(ratio))
    return {k: statistics.median(ratios) for k, ratios in sorted(found.items())}


def kept_checks(device: str | None, kept: Path = MEASURED_DIR) -> list[dict]:
    """The compile_concurrency checks kept in `kept` that applied on `device` (their JSON, by file name)."""
    found = [json.loads(Path(p).read_text()) for p in sorted(glob.glob(f"{kept}/*.json"))]
    return [c for c in found if c.get("applicable") and c.get("device") == device]


def factor_at(k: float, measured: dict[int, float] | None) -> float:
    """The factor at k at once from the checks' ratios by k (module docstring); AT_ONCE at 8 where none measured."""
    if k <= 1:
        return 1.0
    points = {1: 1.0} | (measured or {8: AT_ONCE})
    if k in points:
        return points[k]
    below, above = [x for x in points if x < k], [x for x in points if x > k]
    if above:  # between two measured k (alone: 1 at k = 1): a line between them
        lo, hi = max(below), min(above)
        return points[lo] + (points[hi] - points[lo]) * (k - lo) / (hi - lo)
    ref = max(below)
    return 1.0 + (points[ref] - 1.0) * share(k, ref)


def share(k: float, ref: float) -> float:
    """The share of a factor measured at `ref` at once that a compile k at once bears (factor_at(k, {ref: r}) = 1 +
    (r - 1) x share): (k - 1) / (ref - 1) up to ref, beyond it as MEASURED_SLOWDOWN grew."""
    if k <= 1 or ref <= 1:
        return 0.0
    if k <= ref:
        return (k - 1) / (ref - 1)
    return (slowdown(k) - 1.0) / (slowdown(ref) - 1.0)


def mean_at_once(windows: list) -> list:
    """Per window ([start, end] a compile held its slot, seconds since the epoch; None: not recorded), how many of
    the windows ran at once while it ran, itself included, time-weighted over it (None where not recorded)."""
    known = [w for w in windows if w is not None]
    out = []
    for w in windows:
        if w is None or not w[1] > w[0]:
            out.append(None if w is None else 1.0)
            continue
        overlap = sum(max(0.0, min(w[1], o[1]) - max(w[0], o[0])) for o in known)
        out.append(overlap / (w[1] - w[0]))
    return out


def at_once_factor(references: str, device: str, k: float | None = None) -> float:
    """How much longer a cold compile takes among k others at once than alone (k None: the checks' median ratio,
    whatever their k): the stored studies' compile_concurrency checks on `device`, at k (factor_at); AT_ONCE
    where none measured."""
    measured = checks(references, device)
    if k is None:
        return statistics.median(measured.values()) if measured else AT_ONCE
    return factor_at(k, measured)
