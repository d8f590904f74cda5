"""Where a study's wall time went, call by call: every second of a call given to one part.

A call (one line of calls.jsonl, core/calls/session.py) is one Snakemake invocation; its Snakemake log (kept under
`logs/calls/<n>.snakemake.log`) says when each job started and finished, to the second. Each second of the
call goes to the jobs running in it, split evenly where several run at once (N GPUs), and to Snakemake
itself where none runs (its start, DAG and scheduling, each job's bookkeeping, its exit). A run's share is
split further by its record's parts (record.OVERHEAD), over its own job window where the record has one
(launcher records: to the millisecond), so the parts of a call sum to its wall time. A cold compile of the
compile phase is split the same way under "compile phase", or "GEMM search" where it ran alone. A run whose
load was let run beside timed work (its record's `load_phase`) has two windows: its load (up to its timed
part's start) gets only the seconds in which nothing but loads runs, booked as "runs: load: <part>" by the
parts booked before its timed part; its load's seconds beside other jobs' work are counted once, by those
jobs, and shown apart (OVERLAPPED, not in the sum).

The floor of a study is the part of its wall time that must hold the device alone (FLOOR: the timed blocks,
the evidence, each timed process's warm-cache load, the method checks, the matmul peak, the MLP claim and the
GEMM searches): nothing else could run beside it, so no schedule is shorter. In a study made before the compile
phase, a run that compiled cold books that compile as "runs: cold compile" (the compile phase's work, no part of
the floor), or as a GEMM search where it searched its own. Torch-free.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from compile_study.core import record, vocab
from compile_study.core.layout import Layout

_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_START = re.compile(r"^(?:local)?rule (\w+):$")
_FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)")
_DATE = re.compile(r"^\s*Date: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_PLAN = re.compile(r"study plan: .* \((\d+) s in all")
SNAKEMAKE = "snakemake"  # the part of a call in which no job runs
# the parts that must hold the device alone (and "GEMM search: ..."): no other work may run beside them
FLOOR = ("runs: timed", "runs: compile", "runs: phase split", "runs: profiler", "runs: inference", "runs: accuracy",
         "method checks", "matmul peak", "MLP claim")
SEARCH = "GEMM search"
OVERLAPPED = "runs: loads beside other jobs' work (not in the sum)"  # seconds each loading run spent beside them
# how the table names a rule's time; a rule not here is named by itself
RULE_PART = {"prepare_data": "data preparation", "study_facts": "data preparation", "study_config": "data preparation",
             "parity": "parity checks", "measure_peak": "matmul peak", "mlp_claim": "MLP claim",
             "method_check": "method checks", "summarize": "summary", "figures": "figures", "paper": "paper",
             "paper_pdf": "PDF", "study_readme": "study README"}


@dataclass
class Job:
    rule: str
    jobid: int
    start: float  # seconds since the epoch
    end: float | None  # None: never finished in this call (interrupted or failed)
    output: str = ""


def read_calls(path: str | Path) -> list[dict]:
    """The lines of a study's calls.jsonl (session.py), none where it does not exist."""
    path = Path(path)
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.is_file() else []


def study_calls(study: str | Path) -> list[dict]:
    """A study directory's logged calls (its Layout's calls.jsonl)."""
    return read_calls(Layout(str(study)).calls)


def call_log(study: str | Path, call: dict) -> Path:
    """Where a stored study keeps the Snakemake log of one of its calls (Layout.stored_log)."""
    return Path(Layout(str(study)).stored_log(call.get("snakemake_log", "-")))


def logged_jobs(study: str | Path) -> list[list[Job]]:
    """The jobs of each of a stored study's calls whose Snakemake log it keeps (logs/), call by call."""
    logs = [(call, call_log(study, call)) for call in study_calls(study)]
    return [jobs_of(log.read_text(), _utc(call["start_utc"])) for call, log in logs if log.is_file()]


def _in_study(output: str) -> str:
    """A job's output as a path in its study (runs/...): the study ran as results/<device>[-<model>]."""
    return re.sub(r"^results/[^/]+/", "", output)


def _utc(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _log_start(log_text: str) -> float | None:
    """Snakemake's start (its `Date:` line), the log's local time read as if it were UTC."""
    date = next((m[1] for m in map(_DATE.match, log_text.splitlines()) if m), None)
    return datetime.fromisoformat(date).replace(tzinfo=UTC).timestamp() if date else None


def _stamp(text: str) -> float:
    """One of the log's time stamps (`Tue Dec  1 21:56:10 2026`), local time read as if it were UTC."""
    return datetime.strptime(text, "%a %b %d %H:%M:%S %Y").replace(tzinfo=UTC).timestamp()


def _zone(seconds: float) -> float:
    return round(seconds / 900) * 900  # time zones are whole quarter hours


def jobs_of(log_text: str, call_start: float) -> list[Job]:
    """The jobs of one Snakemake log, in seconds since the epoch. The log writes local time without a zone:
    the zone is the one that puts Snakemake's own start (its `Date:` line) nearest the call's start."""
    local0 = _log_start(log_text)
    offset = _zone(local0 - call_start) if local0 is not None else 0.0
    jobs: dict[int, Job] = {}
    stamp, pending = None, None
    for line in log_text.splitlines():
        if m := _STAMP.match(line):
            stamp = _stamp(m[1]) - offset
        elif m := _START.match(line):
            pending = Job(m[1], -1, stamp, None)
        elif pending and line.strip().startswith("output:"):
            pending.output = _in_study(line.split(":", 1)[1].strip().split(",")[0])
        elif pending and line.strip().startswith("jobid:"):
            pending.jobid = int(line.split(":", 1)[1])
            jobs[pending.jobid] = pending
            pending = None
        elif (m := _FINISHED.match(line)) and int(m[1]) in jobs:
            jobs[int(m[1])].end = stamp
    return list(jobs.values())


def _own_record(job: Job, runs: dict[str, dict], call_start: float, call_end: float) -> dict | None:
    """The record this job wrote, or None: none, or one a later call wrote after a time limit stopped this
    job (its job window lies outside this call; a record without a window is taken as this job's)."""
    rec = runs.get(job.output)
    window = ((rec or {}).get("metrics") or {}).get("job_window_unix")
    if rec and window and None not in window and not call_start - 2 <= window[0] <= call_end:
        return None
    return rec


def _windows(jobs: list[Job], runs: dict[str, dict], call_start: float,
             call_end: float) -> list[tuple[float, float, str, str, dict | None, str]]:
    """(start, end, rule, output, its record, its phase) per job window; a run whose record has its job window
    takes that window, split at its timed part's start where its load ran beside timed work ("load", "timed");
    any other window is "job"."""
    out = []
    for job in jobs:
        rec = _own_record(job, runs, call_start, call_end)
        window = ((rec or {}).get("metrics") or {}).get("job_window_unix")
        start, end = (window if window and None not in window else (job.start, job.end or call_end))
        end = min(end, call_end)
        timed = timed_start(rec) if window and None not in window else None
        if timed is not None and start < timed < end:
            out += [(start, timed, job.rule, job.output, rec, "load"), (timed, end, job.rule, job.output, rec, "timed")]
        else:
            out.append((start, end, job.rule, job.output, rec, "job"))
    return out


def timed_start(rec: dict | None) -> float | None:
    """When a run's timed part began, where its load was let run beside timed work (its first attempt's, where
    it was redone: the redos held the lane), else None."""
    first = ((rec or {}).get("earlier_attempts") or [rec or {}])[0]
    m = first.get("metrics") or {}
    if not (m.get("load_phase") or {}).get("beside_timed_work") or not m.get("timed_part"):
        return None
    return m["timed_part"]["start_unix"]


def phase_parts(rec: dict, phase: str) -> dict[str, float]:
    """A run's overhead_s parts booked in one phase of its job window: "load", those booked before its timed part
    began (its first attempt's load, and the wait for the host before and after it); "timed", the rest; "job",
    all of them."""
    overhead = dict((rec.get("metrics") or {}).get("overhead_s") or {})
    if phase == "job":
        return overhead
    first = (rec.get("earlier_attempts") or [rec])[0]["metrics"]
    load = first["load_phase"]["parts"]
    before = load | {"gpu_wait_s": load.get("gpu_wait_s", 0.0) + first["timed_part"]["waited_s"]}
    before_s = sum(v for k, v in before.items() if k != "total_s")
    if phase == "load":
        return before | {"total_s": before_s}
    if rec.get("earlier_attempts"):  # the job's wait before its first process is in every attempt's clock; the rest
        slot = load.get("gpu_wait_s", 0.0)  # of the first attempt, in the earlier attempts' `redo_s`
        after = overhead | {"gpu_wait_s": max(0.0, overhead.get("gpu_wait_s", 0.0) - slot),
                            "redo_s": max(0.0, overhead.get("redo_s", 0.0) - (before_s - slot))}
    else:
        after = {k: max(0.0, v - before.get(k, 0.0)) for k, v in overhead.items()}
    return after | {"total_s": overhead.get("total_s", 0.0) - before_s}


def shares(windows, call_start: float, call_end: float) -> tuple[Counter, float, float]:
    """Each window's seconds (by rule, output and phase), every second split evenly among the windows running in
    it, loads only where nothing else runs -> (shares, idle, the loads' seconds beside other jobs' work)."""
    cuts = sorted({call_start, call_end, *(t for w in windows for t in w[:2] if call_start < t < call_end)})
    got, idle, beside = Counter(), 0.0, 0.0
    for a, b in zip(cuts, cuts[1:]):
        running = [w for w in windows if w[0] <= a and w[1] >= b]
        work = [w for w in running if w[5] != "load"]
        beside += (b - a) * (len(running) - len(work)) if work else 0.0
        if not running:
            idle += b - a
        for w in work or running:
            got[(w[2], w[3], w[5])] += (b - a) / len(work or running)
    return got, idle, beside


def run_parts(rec: dict | None, seconds: float, kind: str = "runs", phase: str = "job") -> dict[str, float]:
    """A run's (or a cold compile's) share of the call, split as its record's parts (the rest: unbooked); of a
    run's load (phase "load"), as the parts booked before its timed part, named "runs: load: <part>"."""
    if rec is None:
        return {f"{kind}: stopped before a record": seconds}  # interrupted (or its Snakemake job failed)
    overhead = phase_parts(rec, phase) if kind == "runs" else (rec.get("metrics") or {}).get("overhead_s") or {}
    kind = "runs: load" if phase == "load" else kind
    total = overhead.get("total_s") or 0.0
    if not total:
        return {f"{kind}: unbooked": seconds}
    parts = {f"{kind}: {k.removesuffix('_s').replace('_', ' ')}": seconds * (overhead.get(k) or 0.0) / total
             for k in record.OVERHEAD if k != "total_s"}
    if kind == "runs" and _compiled_cold(rec):  # a study made before the compile phase compiled in its runs
        parts[cold_part(rec)] = parts.pop("runs: compile")
    return parts | {f"{kind}: unbooked": seconds - sum(parts.values())}


def _compiled_cold(rec: dict) -> bool:
    return rec["env"].get("inductor_cache") in ("cold", vocab.SEARCH_SHARED) and rec["config"]["compile_mode"] != "eager"


def cold_part(rec: dict) -> str:
    """Where a run's cold compile is booked: a max-autotune mode's own GEMM search holds the device alone; any other
    compile could have run in a compile phase (it is no part of the floor)."""
    own_search = rec["config"]["compile_mode"] in vocab.AUTOTUNE_MODES and rec["env"]["inductor_cache"] == "cold"
    return f"{SEARCH}: compile" if own_search else "runs: cold compile"


def _kind(rule: str, rec: dict | None) -> str | None:
    """How a job's share is named by its record's parts: runs, the compile phase, a GEMM search; None: by rule."""
    if rule == "train_run":
        return "runs"
    if rule in ("cold_compile", "portable_start"):  # a portable start is the compile phase's work too
        return SEARCH if ((rec or {}).get("compile") or {}).get("alone") else "compile phase"
    return None


def floor(parts: dict[str, float]) -> float:
    """The seconds of a breakdown that had to hold the device alone (FLOOR and the GEMM searches; a run's load let
    run beside timed work, "runs: load: ...", need not)."""
    return sum(v for k, v in parts.items() if k in FLOOR or k.startswith(f"{SEARCH}: "))


def breakdown(call: dict, log_text: str, runs: dict[str, dict]) -> dict[str, float]:
    """One call's wall time by part: Snakemake's own, each run part, each other rule's (they sum to wall_s), and
    apart from them (OVERLAPPED) the runs' load seconds beside other jobs' work."""
    start = _utc(call["start_utc"])
    end = start + call["wall_s"]
    windows = _windows(jobs_of(log_text, start), runs, start, end)
    got, idle, beside = shares(windows, start, end)
    mine = {(w[2], w[3]): w[4] for w in windows}
    parts: dict[str, float] = defaultdict(float, {SNAKEMAKE: idle})
    for (rule, output, phase), seconds in got.items():
        kind = _kind(rule, mine[(rule, output)])
        if kind:
            for k, v in run_parts(mine[(rule, output)], seconds, kind, phase).items():
                parts[k] += v
        else:
            parts[RULE_PART.get(rule, rule)] += seconds
    return dict(parts) | ({OVERLAPPED: beside} if beside else {})


def study_breakdown(calls: list[dict], logs: str | Path, record_paths: list[str],
                    root: str | Path) -> tuple[list[dict], dict[str, float]]:
    """A study's calls with a kept Snakemake log (under `logs`) -> (those calls, their parts summed). Its
    records are matched to the log's jobs by their path in the study (runs/...)."""
    runs = {os.path.relpath(p, root): record.read(p) for p in record_paths}
    kept, total = [], Counter()
    for call in calls:
        log = Path(logs) / call.get("snakemake_log", "-")
        if log.is_file():
            total.update(breakdown(call, log.read_text(), runs))
            kept.append(call)
    return kept, dict(total)


def table(parts: dict[str, float], wall: float) -> list[str]:
    """Markdown rows: part, seconds, share of the wall time; the largest first, their sum, the runs' loads beside
    other jobs' work (OVERLAPPED: hidden by them, not in the sum), then the floor (the parts that hold the device
    alone) and the wall time's ratio to it."""
    beside, parts = parts.get(OVERLAPPED), {k: v for k, v in parts.items() if k != OVERLAPPED}
    rows = ["| part | seconds | share |", "|---|---:|---:|"]
    for name, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
        if abs(seconds) >= 0.05:
            rows.append(f"| {name} | {seconds:.1f} | {seconds / wall:.1%} |")
    total, least = sum(parts.values()), floor(parts)
    rows.append(f"| sum of the parts (the calls' wall time: {wall:.1f} s) | {total:.1f} | {total / wall:.1%} |")
    if beside:
        rows.append(f"| {OVERLAPPED} | {beside:.1f} | {beside / wall:.1%} |")
    if least:
        rows.append(f"| floor: the parts that hold the device alone (wall time / floor: {wall / least:.2f}) | "
                    f"{least:.1f} | {least / wall:.1%} |")
    return rows


def plan_seconds(log_text: str) -> float | None:
    """The estimate the call printed before its first job (estimate.plan_message), in seconds."""
    m = _PLAN.search(log_text)
    return float(m[1]) if m else None
