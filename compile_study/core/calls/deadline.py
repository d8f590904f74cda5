"""A call's time limit, seen by its jobs: a run that would not end before it is not started.

    python -m compile_study session --time-limit 540 --grace 30 results/cuda -- snakemake --cores all

`session --time-limit` gives its command the limit's end as COMPILE_STUDY_DEADLINE (seconds since the epoch)
and stops the command there. Every job that holds the device or a compile slot (a run, a cold compile, a parity
check, a method check, the MLP claim, the matmul peak) first compares its estimated seconds (aggregate/estimate/estimate.py,
from the stored records), MARGIN times over, with the time left: a job that does not fit is not started, it
fails with PastDeadline and Snakemake starts no other job, so the call ends between jobs instead of losing one
cut in the middle (a cold max-autotune compile is minutes) or running past the limit (Snakemake lets the jobs
it runs finish; `session --grace` kills what still runs that long after the limit). The next call with the
same command runs it. Without the variable nothing changes. Torch-free.
"""

from __future__ import annotations

import os
import time

VAR = "COMPILE_STUDY_DEADLINE"
# How much longer than its estimate a job may take and still end before the limit: the lent H200 hosts ran the
# same jobs up to 35% apart (a full study took 1,291 s against an estimate of 1,022 s made from a faster host's
# records, and a 123-s method check started 20 s before the limit and ran past it).
MARGIN = 1.35


class PastDeadline(RuntimeError):
    """A job not started because it would not end before the call's time limit."""


def seconds_left() -> float | None:
    """Seconds until the call's time limit, or None where the call has none."""
    value = os.environ.get(VAR)
    return float(value) - time.time() if value else None


def check(expected_s: float | None, what: str) -> None:
    """Raise PastDeadline where `what`, expected to take `expected_s`, would not end before the time limit."""
    left = seconds_left()
    if left is None or expected_s is None or MARGIN * expected_s <= left:
        return
    raise PastDeadline(f"{what}: not started: it takes about {expected_s:.0f} s by the estimate (up to "
                       f"{MARGIN * expected_s:.0f} s on a slower host) and the call's time limit comes in "
                       f"{max(left, 0):.0f} s; the next call with the same command runs it")
