"""What a user pays before the first compiled step, and after how many steps it pays back (torch-free).

    from compile_study.core.payback_stats import Cost, Ratio, break_even, cost_interval
    cost = Cost(own=cold_compiles, divisor=Ratio(phase_compiles, alone_compiles), added=(search,))
    cost_interval(cost)                        # its seconds, with an interval that holds whenever every part's does
    break_even(cost, speedups, eager_step_ms)  # the steps after which compiling pays, with its interval

A Cost is a sum of measured parts (core/stats.py's intervals on each): its own seconds (one per process: a cold
compile, a portable start, a warm-cache load), over a slowdown a user does not pay (compiles timed k at once: the
compile-concurrency check's per-round ratios, or a Ratio of two sets of compiles), plus what is paid once more (a
shared GEMM search). A break-even is a Cost's seconds over the seconds a step saves, eager's step x (1 - 1 /
speedup); its interval takes every part's and the speedup's at 1 - 5% / sides (Bonferroni: it holds whenever all
do); a part measured fewer than MIN_N times gives it none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from compile_study.core.intervals import BREAK_EVEN_SIDE, LEVEL, MIN_N, NAN, Interval
from compile_study.core.stats import finite_positive, ratio_interval, speedup_interval


@dataclass(frozen=True)
class Ratio:
    """A ratio measured as two sets of processes (`subject` over `yardstick`, each a tuple of values): its interval
    is ratio_interval's (Welch t on the log ratio), at whatever level a Cost asks."""

    subject: tuple
    yardstick: tuple

    def interval(self, level: float = LEVEL) -> Interval:
        return ratio_interval(self.subject, self.yardstick, level)

    def __len__(self) -> int:  # its processes, as a part of a Cost counts them: the smaller side's
        return min(len(finite_positive(self.subject)), len(finite_positive(self.yardstick)))


def _count(values) -> int:
    return len(values) if isinstance(values, Ratio) else len(finite_positive(values))


def _part_interval(values, level: float) -> Interval:
    if isinstance(values, Ratio):
        return values.interval(level)
    return speedup_interval(values, level, of="seconds")


@dataclass(frozen=True)
class Cost:
    """Seconds a user pays before the first compiled step: the geometric mean of `own` (one value per process: a
    cold compile, a warm-cache load) over that of `divisor` (a slowdown the user does not pay: compiles timed k at
    once; per-round ratios, or a Ratio of two sets of compiles; empty: none), plus that of each of `added` (paid
    once more: a shared GEMM search). `what` names one value of each kind, as the intervals' methods say them."""

    own: tuple = ()
    divisor: tuple | Ratio = ()
    added: tuple = ()  # one tuple of values per part
    what: tuple = ("cold compile", "concurrency round", "GEMM search")
    # per own value, the share of the divisor's excess over 1 it bore (a compile timed among fewer than the divisor's
    # k at once: aggregate/estimate/at_once.py share): it is divided by 1 + (divisor - 1) x share; empty: each by the divisor
    shares: tuple = ()

    @classmethod
    def of(cls, cost) -> Cost:
        return cost if isinstance(cost, Cost) else cls(tuple(cost))

    def parts(self) -> list[tuple[str, str, tuple]]:
        """(role, name, values) of every measured part: own, then the divisor where there is one, then each added."""
        out = [("own", self.what[0], tuple(self.own))]
        divisor = self.divisor if isinstance(self.divisor, Ratio) else tuple(self.divisor)
        out += [("divisor", self.what[1], divisor)] if len(self.divisor) else []
        return out + [("added", self.what[2], tuple(a)) for a in self.added]


def _divided(own: tuple, shares: tuple, ratio: float) -> tuple:
    """Each own value over 1 + (ratio - 1) x its share (its share of the slowdown `ratio` measured)."""
    return tuple(v / (1 + (ratio - 1) * w) for v, w in zip(own, shares, strict=True))


def _cost_at(cost: Cost, level: float | None) -> tuple[float, float, float]:
    """(point, low, high) of a cost, each part's interval at `level` (None: points only). With shares, the own
    values each divided at the divisor's point give the own part's interval, and the divisor's ends move it by
    how much more or less they divide the same values."""
    ivs = [(role, _part_interval(v, level or LEVEL)) for role, _, v in cost.parts()]
    div = next((iv for role, iv in ivs if role == "divisor"), None)
    own, added = ivs[0][1], [iv for role, iv in ivs if role == "added"]
    if div is not None and cost.shares:
        own = _part_interval(_divided(cost.own, cost.shares, div.point), level or LEVEL)
        at = {r: _divided(cost.own, cost.shares, r) for r in (div.low, div.point, div.high)}
        # the divisor's ends as a factor on the own part: the geometric mean divided at an end over at the point
        div = Interval(1.0, *(float(np.exp(np.mean(np.log(at[div.point])) - np.mean(np.log(at[r]))))
                               for r in (div.low, div.high)), div.method, div.n, div.level)
    point = own.point / (div.point if div else 1.0) + sum(a.point for a in added)
    if level is None:
        return point, NAN, NAN
    low = own.low / (div.high if div else 1.0) + sum(a.low for a in added)
    high = own.high / (div.low if div else 1.0) + sum(a.high for a in added)
    return point, low, high


def _missing(cost: Cost) -> str | None:
    """Why a cost has no interval (a part measured fewer than MIN_N times), or None."""
    for _, name, values in cost.parts():
        n = _count(values)
        if n < MIN_N:
            return f"no {name}" if n == 0 else f"{n} {name}{'s' if n > 1 else ''}, no interval"
    return None


def cost_interval(cost, level: float = LEVEL) -> Interval:
    """A cost's seconds (Cost; a plain list: its own values alone) with an interval that holds whenever every
    part's does, each part's taken at 1 - (1 - level) / parts (Bonferroni); none where a part has fewer than MIN_N
    values. A cost of one part is that part's t interval."""
    cost = Cost.of(cost)
    parts = cost.parts()
    if len(parts) == 1:
        return speedup_interval(cost.own, level, of="seconds")
    n = min(_count(v) for _, _, v in parts)
    point = _cost_at(cost, None)[0] if n else NAN
    why = _missing(cost)
    if why:
        return Interval(point, NAN, NAN, why, n, NAN)
    each = 1 - (1 - level) / len(parts)
    _, low, high = _cost_at(cost, each)
    return Interval(point, low, high, f"Bonferroni, {each:.1%} t on each of {len(parts)} parts, n = {n}", n, level)


def break_even(cost, speedups: Iterable, eager_step_ms: float, level: float = LEVEL) -> Interval:
    """Steps after which compiling pays: a cost's seconds (Cost, or a plain list of cold compiles) over the
    seconds a step saves, eager_step x (1 - 1/speedup). Point: from the geometric means (inf where the speedup is
    not above 1). Interval (every part and the speedup with MIN_N values or more): each part's and the speedup's
    interval at 1 - (1 - level) / sides, the cheapest cost over the largest saving to the dearest over the smallest
    (inf where that speedup is not above 1), so that it holds whenever all do: with `level` or more (Bonferroni),
    whatever their dependence."""
    cost = Cost.of(cost)
    s = speedup_interval(speedups)

    def steps(seconds, speedup):
        saved = eager_step_ms * (1 - 1 / speedup) / 1e3
        return float("inf") if not saved > 0 else max(seconds, 0.0) / saved

    n_cost = min(_count(v) for _, _, v in cost.parts())
    point = steps(_cost_at(cost, None)[0], s.point) if n_cost and np.isfinite(s.point) else NAN
    why = _missing(cost)
    if why:
        return Interval(point, NAN, NAN, why, n_cost, NAN)
    if s.n < MIN_N:
        return Interval(point, NAN, NAN, f"speedup n = {s.n}, no interval", s.n, NAN)
    sides = len(cost.parts()) + 1
    each = BREAK_EVEN_SIDE if sides == 2 and level == LEVEL else 1 - (1 - level) / sides
    _, low, high = _cost_at(cost, each)
    s2 = speedup_interval(speedups, each)
    ns = [_count(v) for _, _, v in cost.parts()] + [s.n]
    counts = " and ".join(map(str, ns)) if len(ns) == 2 else ", ".join(map(str, ns[:-1])) + f" and {ns[-1]}"
    label = "on each side" if sides == 2 else f"on each of {sides} sides"
    return Interval(point, steps(low, s2.high), steps(high, s2.low), f"Bonferroni, {each:.1%} t {label}, n = {counts}",
                    min(ns), level)
