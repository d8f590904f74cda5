"""What an interval is and the rule's constants: the part of the statistics a reader of the tables needs to
word them, with no computation (core/stats.py computes; the report imports only this).

    from compile_study.core.intervals import LEVEL, MIN_N, Interval
"""

from __future__ import annotations

from dataclasses import dataclass

LEVEL = 0.95  # nominal coverage of every interval
MIN_N = 3  # fewest processes for an interval, a verdict and a comparative word
BREAK_EVEN_SIDE = 1 - (1 - LEVEL) / 2  # a break-even's interval takes each side's at this level (Bonferroni)
BAND_SDS = 1.0  # the A/A band's second term: |mean| + BAND_SDS x SD of the per-process A/A log ratios
NAN = float("nan")


@dataclass(frozen=True)
class Interval:
    """A configuration's speedup: point, interval ends (NaN if none), how they were made, nominal coverage."""

    point: float
    low: float
    high: float
    method: str  # a label for summary.csv: "t on log ratio, n = 5", "n = 2, no interval", "single run"
    n: int  # processes with a finite speedup
    level: float  # nominal coverage; NaN where none is claimed (n < 3)


@dataclass(frozen=True)
class Band:
    """The A/A band [low, high] of a cell and the measured variation it is made from (log units)."""

    low: float
    high: float
    chunk_noise: float  # pooled within-process SD of per-chunk A/A log ratios
    between_sd: float  # SD of the per-process A/A log ratios (NaN with fewer than 2)
    n: int  # eager processes
