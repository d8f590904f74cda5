"""The order of a study's timed runs, where loads overlap timed work (config `overlap_loads`, issue 48).

A run's load (its process, CUDA, data, model, warm-cache load, warm-up steps: measure/process/handover.py) runs beside the
timed part of the run before it on its lane, and adds to the wall time only what it takes beyond that timed part
(estimate.runs_wall). So the order matters: a long load (a compiled scope that loads for seconds) beside a long
timed part (a first repeat, which takes the evidence) is hidden, beside a short one (an eager repeat) it is not.
run_order finds an order that hides more: the runs dealt in turn to the lanes (as Snakemake's slots and
measure/process/isolation.py Host give them out), longest timed part first, then pairwise swaps while any shortens the
wall. The plan gives each run a Snakemake `priority` by its place (plan/timed_jobs.py run_priority: below the
compile phase's), and the estimate prices the same order. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence


def wall(runs: Sequence[tuple[float, float]], order: Sequence[int], lanes: int = 1) -> float:
    """The runs' wall time in `order` ((seconds, of them its load) each; runs dealt in turn to `lanes` lanes),
    loads overlapping timed work: each lane's first load, then per run the longer of its timed part and the next
    run's load, then the last timed part; the lanes' sum over their count (estimate.runs_wall)."""
    lanes = max(lanes, 1)
    return sum(_term(runs, order, p, lanes) for p in range(len(order))) / lanes + sum(
        runs[order[p]][1] for p in range(min(lanes, len(order)))) / lanes


def _term(runs, order, p: int, lanes: int) -> float:
    """The wall time position p adds after its load: the longer of its timed part and the next load on its lane,
    or, last on its lane, its timed part."""
    total, load = runs[order[p]]
    nxt = p + lanes
    return max(total - load, runs[order[nxt]][1]) if nxt < len(order) else total - load


def run_order(runs: Sequence[tuple[float, float]], lanes: int = 1, passes: int = 50) -> list[int]:
    """Indices of `runs` ((seconds, of them its load) each) in an order that hides more of the loads: longest
    timed part first (ties: by index), then every swap of two places that shortens wall(), pass after pass, until
    none does (at most `passes`)."""
    lanes = max(lanes, 1)
    order = sorted(range(len(runs)), key=lambda i: (-(runs[i][0] - runs[i][1]), i))
    n = len(order)

    def touched(i: int, j: int) -> set[tuple[str, int]]:
        out = set()
        for p in (i, j):
            out |= {("term", p)} | ({("term", p - lanes)} if p >= lanes else {("start", p)})
        return out

    def cost(terms) -> float:
        return sum(runs[order[p]][1] if kind == "start" else _term(runs, order, p, lanes) for kind, p in terms)

    for _ in range(passes):
        improved = False
        for i in range(n):
            for j in range(i + 1, n):
                terms = touched(i, j)
                before = cost(terms)
                order[i], order[j] = order[j], order[i]
                if cost(terms) < before - 1e-9:
                    improved = True
                else:
                    order[i], order[j] = order[j], order[i]
        if not improved:
            break
    return order
