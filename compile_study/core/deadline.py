"""A call's time limit, seen by its jobs: a run that would not end before it is not started.

    python -m compile_study session results/cuda --time-limit 570 -- snakemake --cores all

`session --time-limit` gives its command the limit's end as COMPILE_STUDY_DEADLINE (seconds since the epoch)
and stops the command there. Each run's job first compares the run's estimated seconds (aggregate/estimate.py,
from the stored records) with the time left: a run that does not fit is not started, its job fails with
PastDeadline and Snakemake starts no other job, so the call ends between runs instead of losing a run cut in
the middle (a cold max-autotune compile is minutes). The next call with the same command runs it. Without the
variable nothing changes. Torch-free.
"""

from __future__ import annotations

import os
import time

VAR = "COMPILE_STUDY_DEADLINE"


class PastDeadline(RuntimeError):
    """A job not started because it would not end before the call's time limit."""


def seconds_left() -> float | None:
    """Seconds until the call's time limit, or None where the call has none."""
    value = os.environ.get(VAR)
    return float(value) - time.time() if value else None


def check(expected_s: float | None, what: str) -> None:
    """Raise PastDeadline where `what`, expected to take `expected_s`, would not end before the time limit."""
    left = seconds_left()
    if left is None or expected_s is None or expected_s <= left:
        return
    raise PastDeadline(f"{what}: not started: it takes about {expected_s:.0f} s by the estimate and the call's time "
                       f"limit comes in {max(left, 0):.0f} s; the next call with the same command runs it")
