"""Where a study's wall time went, call by call: every second of a call given to one part.

A call (one line of calls.jsonl, core/session.py) is one Snakemake invocation; its Snakemake log (kept under
`logs/calls/<n>.snakemake.log`) says when each job started and finished, to the second. Each second of the
call goes to the jobs running in it, split evenly where several run at once (N GPUs), and to Snakemake
itself where none runs (its start, DAG and scheduling, each job's bookkeeping, its exit). A run's share is
split further by its record's parts (record.OVERHEAD), over its own job window where the record has one
(launcher records: to the millisecond), so the parts of a call sum to its wall time. A cold compile of the
compile phase is split the same way under "compile phase", or "GEMM search" where it ran alone.

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
import shutil
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from compile_study.core import record, vocab

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
             call_end: float) -> list[tuple[float, float, str, str, dict | None]]:
    """(start, end, rule, output, its record) per job; a run whose record has its job window takes that window."""
    out = []
    for job in jobs:
        rec = _own_record(job, runs, call_start, call_end)
        window = ((rec or {}).get("metrics") or {}).get("job_window_unix")
        start, end = (window if window and None not in window else (job.start, job.end or call_end))
        out.append((start, min(end, call_end), job.rule, job.output, rec))
    return out


def shares(windows, call_start: float, call_end: float) -> tuple[Counter, float]:
    """Each job's seconds (by output), every second split evenly among the jobs running in it -> (shares, idle)."""
    cuts = sorted({call_start, call_end, *(t for w in windows for t in w[:2] if call_start < t < call_end)})
    got, idle = Counter(), 0.0
    for a, b in zip(cuts, cuts[1:]):
        running = [w for w in windows if w[0] <= a and w[1] >= b]
        if not running:
            idle += b - a
        for w in running:
            got[(w[2], w[3])] += (b - a) / len(running)
    return got, idle


def run_parts(rec: dict | None, seconds: float, kind: str = "runs") -> dict[str, float]:
    """A run's (or a cold compile's) share of the call, split as its record's parts (the rest: unbooked)."""
    if rec is None:
        return {f"{kind}: stopped before a record": seconds}  # interrupted (or its Snakemake job failed)
    overhead = (rec.get("metrics") or {}).get("overhead_s") or {}
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
    """The seconds of a breakdown that had to hold the device alone (FLOOR and the GEMM searches)."""
    return sum(v for k, v in parts.items() if k in FLOOR or k.startswith(f"{SEARCH}: "))


def breakdown(call: dict, log_text: str, runs: dict[str, dict]) -> dict[str, float]:
    """One call's wall time by part: Snakemake's own, each run part, each other rule's (they sum to wall_s)."""
    start = _utc(call["start_utc"])
    end = start + call["wall_s"]
    windows = _windows(jobs_of(log_text, start), runs, start, end)
    got, idle = shares(windows, start, end)
    mine = {(w[2], w[3]): w[4] for w in windows}
    parts: dict[str, float] = defaultdict(float, {SNAKEMAKE: idle})
    for (rule, output), seconds in got.items():
        kind = _kind(rule, mine[(rule, output)])
        if kind:
            for k, v in run_parts(mine[(rule, output)], seconds, kind).items():
                parts[k] += v
        else:
            parts[RULE_PART.get(rule, rule)] += seconds
    return dict(parts)


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
    """Markdown rows: part, seconds, share of the wall time; the largest first, their sum, then the floor (the
    parts that hold the device alone) and the wall time's ratio to it."""
    rows = ["| part | seconds | share |", "|---|---:|---:|"]
    for name, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
        if abs(seconds) >= 0.05:
            rows.append(f"| {name} | {seconds:.1f} | {seconds / wall:.1%} |")
    total, least = sum(parts.values()), floor(parts)
    rows.append(f"| sum of the parts (the calls' wall time: {wall:.1f} s) | {total:.1f} | {total / wall:.1%} |")
    if least:
        rows.append(f"| floor: the parts that hold the device alone (wall time / floor: {wall / least:.2f}) | "
                    f"{least:.1f} | {least / wall:.1%} |")
    return rows


def plan_seconds(log_text: str) -> float | None:
    """The estimate the call printed before its first job (estimate.plan_message), in seconds."""
    m = _PLAN.search(log_text)
    return float(m[1]) if m else None


def adopt(study: Path, log_path: Path, logs: Path, stopped_by: str | None = None) -> dict:
    """Log a call that no session logged (stopped together with its session, or run without one) from its
    Snakemake log -> its line in study/calls.jsonl. Its start is Snakemake's (the log's `Date:` line) and its end
    the log's last time stamp, made UTC by the zone that puts the log's runs at their records' job windows; its
    host and commit are its records'; its command and exit status were not seen (None), and `adopted` names the
    log. The calls are kept in time order: later ones are numbered on, their kept logs renamed with them."""
    text = log_path.read_text()
    runs = {str(p.relative_to(study)): record.read(p) for p in study.glob("runs/**/r*.json")}
    local0 = _log_start(text)
    local = jobs_of(text, local0)  # the log's own clock
    window = {path: (rec.get("metrics") or {}).get("job_window_unix") for path, rec in runs.items()}
    gaps = [job.start - window[job.output][0] for job in local
            if job.rule == "train_run" and window.get(job.output) and job.start is not None]
    if not gaps:
        raise SystemExit(f"{log_path}: none of its runs has a record in {study} to place it in time")
    offset = _zone(sorted(gaps)[len(gaps) // 2])
    start = local0 - offset
    end = max([_stamp(m[1]) - offset for m in map(_STAMP.match, text.splitlines()) if m] + [start])
    made = [runs[p] for p, w in window.items() if w and start <= w[0] <= end]  # the records this call made
    env = made[0]["env"]
    line = {"call": None, "start_utc": datetime.fromtimestamp(start, UTC).isoformat(timespec="seconds"),
            "end_utc": datetime.fromtimestamp(end, UTC).isoformat(timespec="seconds"), "wall_s": round(end - start, 1),
            "exit_status": None, "command": None, "host_cpus": env.get("cpu_cores"),
            "gpus": [env["device_name"]] if env.get("device_type") == "cuda" else [],
            "adopted": log_path.name, "stopped_by": stopped_by,
            "git_commit": ", ".join(sorted({r["env"].get("git_commit") for r in made} - {None})),
            "git_dirty": any(r["env"].get("git_dirty") for r in made)}
    calls = sorted(read_calls(study / "calls.jsonl") + [line], key=lambda c: c["start_utc"])
    (logs / "calls").mkdir(parents=True, exist_ok=True)
    for n, c in reversed(list(enumerate(calls, 1))):  # renumber from the last: no kept log is overwritten
        if c is line:
            shutil.copy2(log_path, logs / "calls" / f"{n}.snakemake.log")
        elif c.get("snakemake_log") and c["call"] != n:
            os.replace(logs / c["snakemake_log"], logs / "calls" / f"{n}.snakemake.log")
        if c is line or c.get("snakemake_log"):
            c["snakemake_log"] = f"calls/{n}.snakemake.log"
        c["call"] = n
    (study / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
    return line


def main(argv: list[str] | None = None) -> None:
    """Print where every second of a study's logged calls went, the estimate each printed and the runs' fixed cost."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("study", type=Path, help="the study's directory, e.g. results/cuda or reference/<name>")
    parser.add_argument("--logs", type=Path, help="where its calls' Snakemake logs are (default: logs/<device> for "
                                                  "results/<device>, else <study>/logs)")
    parser.add_argument("--adopt", type=Path, metavar="SNAKEMAKE_LOG", help="first log a call that no session "
                        "logged, from its Snakemake log (.snakemake/log/...); see adopt()")
    parser.add_argument("--stopped-by", help="with --adopt: what stopped that call, where it is known")
    args = parser.parse_args(argv)
    paths = sorted(str(p) for p in args.study.glob("runs/**/r*.json") if not p.name.endswith(".trace.json.gz"))
    compiles = sorted(str(p) for pattern in ("c*.json", "p*.json") for p in args.study.glob(f"compiles/**/{pattern}"))
    logs = args.logs or (Path("logs") / args.study.name if args.study.parent.name == "results" else args.study / "logs")
    if args.adopt:
        line = adopt(args.study, args.adopt, logs, args.stopped_by)
        print(f"adopted {args.adopt} as call {line['call']} of {args.study} ({line['wall_s']:.0f} s)")
    calls, parts = study_breakdown(read_calls(args.study / "calls.jsonl"), logs, paths + compiles, args.study)
    for call in calls:
        planned = plan_seconds((logs / call["snakemake_log"]).read_text())
        printed = f"{planned:.0f} s ({planned / call['wall_s'] - 1:+.0%})" if planned else "none"
        print(f"call {call['call']}: wall {call['wall_s']:.1f} s, estimate printed at its start {printed}")
    if calls:
        print("\n".join(table(parts, sum(c["wall_s"] for c in calls))))
    fixed = sorted(f for f in (record.fixed_cost_s(record.read(p)["metrics"].get("overhead_s")) for p in paths)
                   if f is not None)
    if fixed:
        print(f"fixed cost of a run: median {fixed[len(fixed) // 2]:.2f} s over {len(fixed)} runs "
              f"(min {fixed[0]:.2f}, max {fixed[-1]:.2f})")


if __name__ == "__main__":
    main()
