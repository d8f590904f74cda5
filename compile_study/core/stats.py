"""Speedup intervals with stated coverage, the A/A band of a cell, and the verdict rule (torch-free). The rule's
constants (LEVEL, MIN_N, BAND_SDS) and the Interval and Band types are in core/intervals.py, which the report reads.

    from compile_study.core.stats import speedup_table
    table = speedup_table(records, config=CONFIG, cell=CELL)   # records: one row per run (summary.load_records)

The independent unit is the process: each run record is one process that times its subject interleaved, in
chunks of `interleave_chunk` steps, with an eager reference, and its speedup is median(reference) /
median(subject). Steps and chunks of one process share that process's state (host load, clocks, allocator),
so they are not independent repeats; the processes of a configuration are.

Interval of a configuration, from its n processes with a finite speedup (`speedup_interval`):
  - n >= 3: Student-t interval on the mean of the per-process log speedups, back-transformed; the point is
    the geometric mean. Exact when the log speedups are normal across processes; tests/test_stats.py
    simulates studies and checks that the nominal 95% covers the true ratio in 93-97% of them.
  - n = 2: the geometric mean, labelled "n = 2, no interval": the two values' range would claim coverage it
    does not have, and a t interval on one degree of freedom is too wide to read.
  - n = 1: the single value, labelled "single run"; no interval.
  A percentile bootstrap over so few processes is not used: at n = 3 and n = 5 its 95% interval of the
  median is exactly the min-max range of the repeats, which covers the median of their distribution with
  probability 1 - 2 / 2**n (75% and 94%). A hierarchical bootstrap (processes, then chunks) under-covers too.

A/A band of a cell (same device, reference shape regime, precision and batch size; `aa_band`), from the
cell's eager runs, whose "speedup" is eager against eager: the band is [1/m, m] with
    log m = max(chunk noise, |mean A/A log ratio| + BAND_SDS x SD of the A/A log ratios across processes),
  - chunk noise: the pooled within-process SD of the per-chunk A/A log ratios, i.e. how far one chunk of
    eager-vs-eager strays by chance; the band is never narrower than this.
  - the second term is how far one eager-vs-eager process typically lands from 1: the harness's own bias
    plus the between-process SD (with one eager process, that process's distance from 1).
  The band describes single processes, so it does not shrink as repeats are added; the interval does.

Verdict rule (`verdict`), a code from VERDICTS: "faster" only when the whole speedup interval lies above the
band, "slower" only when it lies below it, "within-noise" when it lies inside the band and "indistinct" when it
overlaps an edge. Only a stated-coverage interval (n >= MIN_N) gets a verdict: fewer processes give "few-runs"
(where a configuration varies more between processes than eager does, a range of two values lies wholly
outside the band by chance far more often than 5%: tests/test_stats.py); a cell without eager runs gives
"no-control"; a configuration whose runs (or its cell's eager runs) stayed disturbed by other work on the host
after their redos gets "disturbed" (aggregate/summary.py withhold_disturbed). The paper's templates turn the
codes into words.

A gain (`ratio_interval`) compares two sets of processes, a configuration's and eager's on static batches:
the ratio of their geometric means, with Welch's t interval on the difference of mean logs (both sides' variance
carried), given only where both sides have MIN_N processes. What a cold start costs and when it pays back (a
Cost and its break-even) are core/payback_stats.py's, on these intervals.

Comparison rule (`compare`), the one rule behind every comparative word ("faster than", "fastest", "most"): two
intervals (speedups, gains, or step times read as their inverse) are ordered only when both rest on at least
MIN_N processes and do not overlap; otherwise "indistinct" (or "few-runs"). `top` picks the group a
recommendation may name: every key below it is under every member. Configurations ran in different processes, so
no paired test applies between them; the one comparison made inside a process, against eager, is `verdict`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from compile_study.core.intervals import BAND_SDS, LEVEL, MIN_N, NAN, Band, Interval

__all__ = ["BAND_SDS", "LEVEL", "MIN_N", "NAN", "VERDICTS", "Band", "Interval", "aa_band", "above_chance",
           "compare", "mean_interval", "ratio_interval", "ratio_of_intervals", "speedup_interval", "speedup_table",
           "top", "verdict"]
# verdict codes (the templates word them): against the A/A band, or why there is none
VERDICTS = ("faster", "slower", "within-noise", "indistinct", "few-runs", "no-control", "aa", "no-run", "disturbed")


def finite_positive(values: Iterable) -> np.ndarray:
    v = np.asarray(list(values), float)  # None -> NaN
    return v[np.isfinite(v) & (v > 0)]


def speedup_interval(speedups: Iterable, level: float = LEVEL, of: str = "ratio") -> Interval:
    """The interval of one configuration from its per-process speedups (NaN and non-positive values dropped):
    the geometric mean with a Student-t interval on the logs. `of` names the quantity in the method label
    ("ratio", "seconds": the same interval serves any positive quantity, such as a cold compile's seconds, whose
    geometric mean estimates its median where the logs are normal)."""
    r = finite_positive(speedups)
    n = len(r)
    if n == 0:
        return Interval(NAN, NAN, NAN, "no run", 0, NAN)
    if n == 1:
        return Interval(float(r[0]), NAN, NAN, "single run", 1, NAN)
    logs = np.log(r)
    point = float(np.exp(logs.mean()))
    if n < MIN_N:
        return Interval(point, NAN, NAN, f"n = {n}, no interval", n, NAN)
    half = stats.t.ppf((1 + level) / 2, n - 1) * logs.std(ddof=1) / np.sqrt(n)
    low, high = np.exp(logs.mean() - half), np.exp(logs.mean() + half)
    return Interval(point, float(low), float(high), f"t on log {of}, n = {n}", n, level)


def mean_interval(values: Iterable, level: float = LEVEL, of: str = "seconds") -> Interval:
    """The arithmetic mean of per-process values that may be zero (a compile stage's seconds: a stage a compile
    did not pass through took none), with a Student-t interval (n >= MIN_N, its low end at 0 at least). Means add
    up, so the stages' means sum to the mean of their sums, as a stacked bar draws them; NaN values are dropped."""
    v = np.asarray(list(values), float)
    v = v[np.isfinite(v)]
    n = len(v)
    if n == 0:
        return Interval(NAN, NAN, NAN, "no run", 0, NAN)
    point = float(v.mean())
    if n < MIN_N:
        return Interval(point, NAN, NAN, "single run" if n == 1 else f"n = {n}, no interval", n, NAN)
    half = float(stats.t.ppf((1 + level) / 2, n - 1) * v.std(ddof=1) / np.sqrt(n))
    return Interval(point, max(point - half, 0.0), point + half, f"t on mean {of}, n = {n}", n, level)


def ratio_interval(subject: Iterable, yardstick: Iterable, level: float = LEVEL) -> Interval:
    """The ratio of two sets of processes' values (a configuration's real tokens/s over eager's), each side
    across its own processes: the ratio of geometric means, with Welch's t interval on the difference of mean
    logs, so that it carries both sides' variance. No interval unless both sides have MIN_N processes; `n` is
    the smaller side's."""
    a, b = np.log(finite_positive(subject)), np.log(finite_positive(yardstick))
    if min(len(a), len(b)) < MIN_N:
        return _welch(a.mean() if len(a) else NAN, NAN, len(a), b.mean() if len(b) else NAN, NAN, len(b), level)
    return _welch(a.mean(), a.var(ddof=1) / len(a), len(a), b.mean(), b.var(ddof=1) / len(b), len(b), level)


def ratio_of_intervals(subject: Interval, yardstick: Interval, level: float = LEVEL) -> Interval:
    """ratio_interval from two speedup_intervals rather than their processes' values (where only a summary's rows
    are at hand): a t interval on n logs gives back their mean (log of the point) and its squared standard error
    ((log(high / low) / 2 / t quantile)**2), which is all Welch's interval reads, so the two agree (to the digits
    the intervals were kept with)."""
    def side(iv: Interval) -> tuple[float, float, int]:
        n = int(iv.n) if np.isfinite(iv.n) else 0
        mean = float(np.log(iv.point)) if np.isfinite(iv.point) and iv.point > 0 else NAN
        if n < MIN_N or not (np.isfinite(iv.low) and np.isfinite(iv.high) and iv.low > 0):
            return mean, NAN, n
        se = np.log(iv.high / iv.low) / 2 / stats.t.ppf((1 + iv.level) / 2, n - 1)
        return mean, float(se ** 2), n

    return _welch(*side(subject), *side(yardstick), level)


def _welch(ma: float, va: float, na: int, mb: float, vb: float, nb: int, level: float) -> Interval:
    """exp(ma - mb) with Welch's t interval from each side's mean log, squared standard error and processes."""
    n = min(na, nb)
    if n == 0 or not (np.isfinite(ma) and np.isfinite(mb)):
        return Interval(NAN, NAN, NAN, "no run", 0, NAN)
    point = float(np.exp(ma - mb))
    if n < MIN_N or not (np.isfinite(va) and np.isfinite(vb)):
        return Interval(point, NAN, NAN, "single run" if n == 1 else f"n = {n}, no interval", n, NAN)
    se = np.sqrt(va + vb)
    # Welch-Satterthwaite degrees of freedom (both variances zero: no spread to scale, the interval is the point)
    dof = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1)) if se > 0 else na + nb - 2
    half = stats.t.ppf((1 + level) / 2, dof) * se
    method = f"Welch t on log ratio, n = {na} and {nb}"
    return Interval(point, float(point * np.exp(-half)), float(point * np.exp(half)), method, n, level)


def chunk_log_ratios(subject_ms: Sequence[float], reference_ms: Sequence[float], chunk: int) -> np.ndarray:
    """log(median reference / median subject) per interleaved chunk of `chunk` steps (the last may be shorter)."""
    s, r = np.asarray(subject_ms, float), np.asarray(reference_ms, float)
    if s.shape != r.shape or s.ndim != 1 or int(chunk) < 1:
        raise ValueError(f"need two equal step-time lists and a chunk >= 1, got {s.shape}, {r.shape}, {chunk}")
    chunk = int(chunk)
    pad = -len(s) % chunk  # NaN-padding the last chunk to full length leaves its median unchanged
    s, r = (np.append(x, np.full(pad, np.nan)).reshape(-1, chunk) for x in (s, r))  # [chunks, chunk]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN chunk gives NaN, dropped below
        median = np.median if np.isfinite(s).all() and np.isfinite(r).all() else np.nanmedian  # nanmedian is slow
        logs = np.log(median(r, axis=1) / median(s, axis=1))
    return logs[np.isfinite(logs)]


def pooled_chunk_sd(per_process: Iterable[np.ndarray]) -> float:
    """Within-process SD of per-chunk log ratios, pooled over processes (each about its own mean)."""
    groups = [g for g in (np.asarray(p, float) for p in per_process) if len(g) >= 2]
    dof = sum(len(g) - 1 for g in groups)
    if dof == 0:
        return NAN
    return float(np.sqrt(sum(((g - g.mean()) ** 2).sum() for g in groups) / dof))


def aa_band(aa_speedups: Iterable, chunk_ratios: Iterable[np.ndarray]) -> Band:
    """The A/A band of a cell from its eager runs' speedups and their per-chunk log ratios (module docstring)."""
    logs = np.log(finite_positive(aa_speedups))
    chunk = pooled_chunk_sd(chunk_ratios)
    n = len(logs)
    if n == 0:
        return Band(NAN, NAN, chunk, NAN, 0)
    between = float(logs.std(ddof=1)) if n >= 2 else NAN
    typical = abs(logs.mean()) + (BAND_SDS * between if n >= 2 else 0.0)
    half = float(np.nanmax([typical, chunk]))
    return Band(float(np.exp(-half)), float(np.exp(half)), chunk, between, n)


def verdict(interval: Interval, band: Band) -> str:
    """A code of VERDICTS, by the rule in the module docstring."""
    if interval.n == 0 or not np.isfinite(interval.point):
        return "no-run"
    if interval.n < MIN_N:
        return "few-runs"
    if not (np.isfinite(band.low) and np.isfinite(band.high)):
        return "no-control"
    if interval.low > band.high:
        return "faster"
    if interval.high < band.low:
        return "slower"
    if band.low <= interval.low and interval.high <= band.high:
        return "within-noise"
    return "indistinct"


def compare(a: Interval, b: Interval) -> str:
    """Is a's quantity above b's? "higher" / "lower" only when both rest on MIN_N processes or more and their
    intervals do not overlap; "indistinct" when they overlap; "few-runs" when either has fewer processes."""
    if min(a.n, b.n) < MIN_N or not all(np.isfinite([a.low, a.high, b.low, b.high])):
        return "few-runs"
    if a.low > b.high:
        return "higher"
    if a.high < b.low:
        return "lower"
    return "indistinct"


def top(intervals: dict) -> tuple[list, list]:
    """Among {key: Interval} with MIN_N or more processes: the group of the highest point, best first, and the keys
    below it. The group: the highest point's key and every key whose interval overlaps a member's (one stretch);
    each key below lies wholly under that stretch, below every member by the rule. A group of one is "the
    fastest"; several are "any of these" (two members may still be ordered by `compare`)."""
    ranked = sorted(((k, iv) for k, iv in intervals.items() if iv.n >= MIN_N and np.isfinite(iv.low)),
                    key=lambda kv: -kv[1].point)
    if not ranked:
        return [], []
    low, high = ranked[0][1].low, ranked[0][1].high
    group = {ranked[0][0]}
    grew = True
    while grew:  # a key joins when its interval overlaps the stretch the group's intervals cover
        joining = {k for k, iv in ranked if k not in group and iv.high >= low and iv.low <= high}
        grew = bool(joining)
        group |= joining
        low = min([low] + [iv.low for k, iv in ranked if k in joining])
        high = max([high] + [iv.high for k, iv in ranked if k in joining])
    return [k for k, _ in ranked if k in group], [k for k, _ in ranked if k not in group]


def above_chance(accuracy: float, rows: int, chance: float, level: float = LEVEL) -> bool:
    """Is an accuracy over `rows` examples measurably above `chance` (the share of the most frequent class)? Its
    one-sided Clopper-Pearson lower bound at `level` lies above chance. NaN or no rows: False."""
    if not (np.isfinite(accuracy) and rows and rows > 0):
        return False
    k = round(float(accuracy) * rows)
    low = stats.beta.ppf(1 - level, k, rows - k + 1) if k > 0 else 0.0
    return bool(low > chance)


def _run_chunk_ratios(runs: pd.DataFrame) -> list[np.ndarray]:
    """Per-chunk log ratios of each run that carries both step-time lists (older or failed runs do not)."""
    out = []
    for subject, reference, chunk in zip(runs.step_times_ms, runs.reference_step_times_ms, runs.interleave_chunk):
        lists = isinstance(subject, list | tuple | np.ndarray) and isinstance(reference, list | tuple | np.ndarray)
        if lists and pd.notna(chunk) and len(subject) == len(reference):
            out.append(chunk_log_ratios(subject, reference, int(chunk)))
    return out


def cell_bands(runs: pd.DataFrame, cell: Sequence[str]) -> dict[tuple, Band]:
    """The A/A band of every cell that has successful eager runs, keyed by the cell's values."""
    # eager with AdamW foreach against itself; eager with fused AdamW (scope fused-adamw) is a comparison, not A/A
    eager = runs[(runs.compile_mode == "eager") & (runs.compile_scope == "module") & (runs.status == "ok")]
    return {key: aa_band(g.in_process_speedup, _run_chunk_ratios(g))
            for key, g in eager.groupby(list(cell), sort=True)}


def speedup_table(runs: pd.DataFrame, config: Sequence[str], cell: Sequence[str]) -> pd.DataFrame:
    """Per configuration: the speedup interval (method and n beside it), its cell's A/A band and the verdict.

    runs: one row per run with the `config` and `cell` columns, compile_mode, status, in_process_speedup,
    step_times_ms, reference_step_times_ms and interleave_chunk. Only runs with status "ok" count.
    """
    bands = cell_bands(runs, cell)
    rows = []
    for key, g in runs.groupby(list(config), sort=True):
        iv = speedup_interval(g.loc[g.status == "ok", "in_process_speedup"])
        band = bands.get(tuple(g[c].iloc[0] for c in cell), Band(NAN, NAN, NAN, NAN, 0))
        eager = g.compile_mode.iloc[0] == "eager" and g.compile_scope.iloc[0] == "module"
        rows.append(dict(zip(config, key)) | {
            "speedup": iv.point, "speedup_low": iv.low, "speedup_high": iv.high, "speedup_method": iv.method,
            "speedup_n": iv.n, "speedup_level": iv.level,
            "aa_band_low": band.low, "aa_band_high": band.high, "aa_chunk_noise": band.chunk_noise,
            "aa_between_sd": band.between_sd, "aa_n": band.n,
            "verdict": "aa" if eager else verdict(iv, band),
        })
    return pd.DataFrame(rows)
