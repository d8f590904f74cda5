"""Snakemake's own time in a call, learnt from the stored studies' logs, as the estimate (estimate.py) prices it.

A call's seconds in which no job runs (walltime.shares' idle: a run's or a compile's window from its record
where it has one, to the millisecond, any other job's from the log's stamps, to the second) fall in three parts:
- its start, from the call's start (calls.jsonl) to its first job's: the interpreter, the plan (the config
  checked, torch asked whether it sees the GPU), the DAG, the estimate printed. It grows with the DAG, so the
  estimate takes the start of the logged call whose DAG was largest (its log's `total` jobs);
- its exit, from its last job's end to the call's end, of the calls that ended by themselves (exit status 0, no
  `stopped_by`: a time limit's stop says nothing of an exit); the estimate takes their median;
- its bookkeeping between jobs: the rest of the idle seconds, per job the call started (summed over calls).
Where no logged call of the device (and model) says, PRIOR_START_S, PRIOR_EXIT_S and PRIOR_PER_JOB_S.
Torch-free.
"""

from __future__ import annotations

import os
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from compile_study.aggregate.estimate import costs, walltime
from compile_study.core.layout import Layout

# Seconds, where no logged call says: Snakemake's start and DAG (CUDA: torch imported to see the GPU), its exit,
# and its bookkeeping between two jobs run in its own threads (first estimates of this project, 2026-12-01).
PRIOR_START_S = {"cpu": 6.0, "cuda": 8.0}
PRIOR_EXIT_S = 0.0
PRIOR_PER_JOB_S = 0.3
_TOTAL = re.compile(r"^total\s+(\d+)\s*$", re.M)  # the last line of the log's "Job stats" table


@dataclass
class CallTime:
    start_s: float  # call start -> its first job's start
    exit_s: float | None  # its last job's end -> the call's end (None: the call did not end by itself)
    between_s: float  # the other seconds in which no job ran
    jobs: int  # jobs the call started
    dag: int  # jobs its DAG held (the log's `total`; 0 where the log has no table)


def call_time(call: dict, log_text: str, records: dict[str, dict]) -> CallTime | None:
    """One logged call's Snakemake time (`records`: the study's run and compile records by their path in the
    study, whose job windows place their jobs to the millisecond); None where it started no job."""
    start = walltime._utc(call["start_utc"])
    end = start + call["wall_s"]
    jobs = walltime.jobs_of(log_text, start)
    windows = walltime._windows(jobs, records, start, end)
    if not windows:
        return None
    _, idle, _ = walltime.shares(windows, start, end)
    head = max(0.0, min(w[0] for w in windows) - start)
    tail = max(0.0, end - max(w[1] for w in windows))
    ended = call.get("exit_status") == 0 and not call.get("stopped_by")
    total = _TOTAL.search(log_text)
    return CallTime(head, tail if ended else None, max(0.0, idle - head - tail), len(jobs), int(total[1]) if total else 0)


def logged_calls(studies: list[Path], device: str, model: dict | None = None) -> list[CallTime]:
    """Every logged call of the stored studies of `device` and `model` (as costs.known_jobs picks them)."""
    out = []
    for study in studies:
        layout = Layout(str(study))
        paths = layout.stored_records() + layout.stored_compiles()
        records = {os.path.relpath(p, study): r for p in paths if (r := costs.cached_record(p))}
        if not costs.study_of_kind([r for p, r in records.items() if p.startswith("runs")], device, model):
            continue
        for call in walltime.study_calls(study):
            log = walltime.call_log(study, call)
            if log.is_file() and (t := call_time(call, log.read_text(), records)):
                out.append(t)
    return out


@dataclass
class SnakemakeTime:
    start_s: float
    exit_s: float
    per_job_s: float
    calls: int  # logged calls it was learnt from (0: the priors)

    def seconds(self, jobs: int) -> float:
        """A call's Snakemake time with `jobs` jobs to run."""
        return self.start_s + self.exit_s + self.per_job_s * jobs


def learned(studies: list[Path], device: str, model: dict | None = None) -> SnakemakeTime:
    """Snakemake's start, exit and per-job time (module docstring) from the stored studies' logged calls."""
    calls = logged_calls(studies, device, model)
    if not calls:
        return SnakemakeTime(PRIOR_START_S[device], PRIOR_EXIT_S, PRIOR_PER_JOB_S, 0)
    start = max(calls, key=lambda c: (c.dag, c.start_s)).start_s
    exits = [c.exit_s for c in calls if c.exit_s is not None]
    jobs = sum(c.jobs for c in calls)
    per_job = sum(c.between_s for c in calls) / jobs if jobs else PRIOR_PER_JOB_S
    return SnakemakeTime(start, statistics.median(exits) if exits else PRIOR_EXIT_S, per_job, len(calls))
