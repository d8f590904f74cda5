"""The `walltime` command: where every second of a study's logged calls went (walltime.py), the estimate each
call printed and the runs' fixed cost; and a call that no session logged (stopped together with its session, or
run without one), logged afterwards from its Snakemake log (adopt):

    python -m compile_study walltime results/cuda
    python -m compile_study walltime results/cuda --adopt .snakemake/log/<its log>

Torch-free.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from compile_study.aggregate.estimate import walltime
from compile_study.aggregate.estimate.walltime import _STAMP, _log_start, _stamp, _zone, jobs_of, read_calls
from compile_study.core import record
from compile_study.core.layout import LIVE, Layout, log_root, require_study


def adopt(study: Path, log_path: Path, logs: Path, stopped_by: str | None = None) -> dict:
    """Log a call that no session logged (stopped together with its session, or run without one) from its
    Snakemake log -> its line in study/calls.jsonl. Its start is Snakemake's (the log's `Date:` line) and its end
    the log's last time stamp, made UTC by the zone that puts the log's runs at their records' job windows; its
    host and commit are its records'; its command and exit status were not seen (None), and `adopted` names the
    log. The calls are kept in time order: later ones are numbered on, their kept logs renamed with them."""
    text = log_path.read_text()
    runs = {os.path.relpath(p, study): record.read(p) for p in Layout(str(study)).stored_records()}
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
    calls = sorted(read_calls(Layout(str(study)).calls) + [line], key=lambda c: c["start_utc"])
    (logs / "calls").mkdir(parents=True, exist_ok=True)
    for n, c in reversed(list(enumerate(calls, 1))):  # renumber from the last: no kept log is overwritten
        if c is line:
            shutil.copy2(log_path, logs / "calls" / f"{n}.snakemake.log")
        elif c.get("snakemake_log") and c["call"] != n:
            os.replace(logs / c["snakemake_log"], logs / "calls" / f"{n}.snakemake.log")
        if c is line or c.get("snakemake_log"):
            c["snakemake_log"] = f"calls/{n}.snakemake.log"
        c["call"] = n
    Path(Layout(str(study)).calls).write_text("".join(json.dumps(c) + "\n" for c in calls))
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
    require_study(args.study)
    layout = Layout(str(args.study))
    paths, compiles = layout.stored_records(), layout.stored_compiles()
    logs = args.logs or Path(log_root(str(args.study)) if args.study.parent.name == LIVE else layout.own_logs)
    if args.adopt:
        line = adopt(args.study, args.adopt, logs, args.stopped_by)
        print(f"adopted {args.adopt} as call {line['call']} of {args.study} ({line['wall_s']:.0f} s)")
    calls, parts = walltime.study_breakdown(walltime.study_calls(args.study), logs, paths + compiles, args.study)
    for call in calls:
        planned = walltime.plan_seconds((logs / call["snakemake_log"]).read_text())
        printed = f"{planned:.0f} s ({planned / call['wall_s'] - 1:+.0%})" if planned else "none"
        print(f"call {call['call']}: wall {call['wall_s']:.1f} s, estimate printed at its start {printed}")
    if calls:
        print("\n".join(walltime.table(parts, sum(c["wall_s"] for c in calls))))
    fixed = sorted(f for f in (record.fixed_cost_s(record.read(p)["metrics"].get("overhead_s")) for p in paths)
                   if f is not None)
    if fixed:
        print(f"fixed cost of a run: median {fixed[len(fixed) // 2]:.2f} s over {len(fixed)} runs "
              f"(min {fixed[0]:.2f}, max {fixed[-1]:.2f})")


if __name__ == "__main__":
    main()
