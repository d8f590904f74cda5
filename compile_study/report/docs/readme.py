"""README text generated from a study's files, never typed.

- The study directory's README.md (rule study_readme): what the study is, which code and hardware made it, how
  it was run (each call of calls.jsonl, session.py), where its time went, its headline (the paper's abstract)
  and how to remake its outputs:

      snakemake --cores all results/cuda/README.md

The project README's and docs/' generated blocks are made by project_docs.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from compile_study.aggregate.estimate import walltime
from compile_study.core import record
from compile_study.core.calls import session
from compile_study.core.io import write_text_atomic
from compile_study.report.docs import times
from compile_study.report.numbers import join


def _code(records: pd.DataFrame) -> str:
    commits = sorted({str(c) for c in records.git_commit.dropna()})
    dirty = int(records.git_dirty.fillna(True).astype(bool).sum())
    state = ("clean tree: every record says `git_dirty: false`" if dirty == 0
             else f"**{dirty} of {len(records)} records were made from a tree with uncommitted changes**")
    if len(commits) == 1:
        return f"commit `{commits[0]}`, {state}"
    return f"**{len(commits)} commits** ({', '.join(f'`{c[:12]}`' for c in commits)}), {state}"


def _calls(calls: list[dict], logs: str | Path | None = None, in_progress: int | None = None) -> list[str]:
    """The logged calls, one row each, and the call this README is made in where it is not logged yet."""
    later = [f"Call {in_progress}, which made this README, ends after it and is not yet logged."] if in_progress else []
    if not calls:
        return later or ["No call log (`calls.jsonl`): the study was not run through `python -m compile_study session`."]
    rows = ["| call | start (UTC) | wall | estimate printed at its start, against the wall time from there to the "
            "study's end | exit status | host | command |",
            "|---:|---|---:|---:|---:|---|---|"]
    for i, c in enumerate(calls):
        rest = sum(later["wall_s"] for later in calls[i:])  # a stopped call's plan goes on in the next one
        host = f"{len(c['gpus'])}× {c['gpus'][0]}, {c['host_cpus']} CPUs" if c["gpus"] else f"{c['host_cpus']} CPUs"
        host += f", load {c['load_avg_end'][1]:.1f}" if c.get("load_avg_end") else ""  # 5-minute average at its end
        log = Path(logs) / c["snakemake_log"] if logs and c.get("snakemake_log") else None
        planned = walltime.plan_seconds(log.read_text()) if log and log.is_file() else None
        estimate = f"{planned / 60:.1f} min ({planned / rest - 1:+.0%} of {rest / 60:.1f} min)" if planned else "—"
        status = "—" if c["exit_status"] is None else c["exit_status"]
        status = f"{status} (stopped: {c['stopped_by']})" if c.get("stopped_by") else status
        if c.get("killed_after_s") is not None:  # session --grace: jobs still running then were cut, redone later
            status = f"{status}, its running jobs killed at {c['killed_after_s']:.0f} s"
        command = (f"`{' '.join(c['command'])}`" if c.get("command") else
                   f"not seen: logged afterwards from its Snakemake log `{c.get('adopted')}`")
        rows.append(f"| {c['call']} | {c['start_utc']} | {c['wall_s'] / 60:.1f} min | {estimate} | {status} "
                    f"| {host} | {command} |")
    total = sum(c["wall_s"] for c in calls)
    rows += ["", f"{len(calls)} call(s), {total / 60:.1f} min of wall time in all (each call's Snakemake log is "
                 "under `logs/calls/`)."]
    return rows + ([""] + later if later else [])


def test_line(t: dict) -> str:
    """One pytest session's outcome, as kept in a study's tests/<tier>.json (conftest --tier-record)."""
    state = "clean tree" if t["git_dirty"] is False else "uncommitted changes" if t["git_dirty"] else "tree unknown"
    versions = f"torch {t['torch']}" + (f", triton {t['triton']}" if t.get("triton") else "")
    cut = ", interrupted before its last test" if t.get("interrupted") else ""
    workers = f", {t['workers']} test processes" if t.get("workers") else ""
    tier = f"`-m {t['tier']}`" if t["tier"] != "all" else f"every tier (`python -m pytest`{workers})"
    failing = t.get("not_passed") or []
    which = f"; not passed: {', '.join(f'`{n}`' for n in failing[:3])}{' …' if len(failing) > 3 else ''}" if failing else ""
    why = t.get("skipped_why") or {}  # a record from before the reasons were kept has none
    skips = f"; skipped: {'; '.join(f'{n} × {reason}' for reason, n in why.items())}" if why else ""
    return (f"{tier}: {t['passed']} passed, {t['failed']} failed, {t['skipped']} skipped, {t['error']} "
            f"errors{cut} in {t['wall_s']:.0f} s on {t['device_name']} ({versions}; commit `{t['git_commit'][:12]}`, "
            f"{state}; {t['date_utc'][:10]}){which}{skips}")


def _tests(tests: list[dict]) -> list[str]:
    if not tests:
        return []
    slow = [f"- slowest of `{t['tier']}`: " + ", ".join(f"`{n.split('::')[-1]}` {sec:.0f} s" for n, sec in t["slowest"][:5])
            for t in tests if t.get("slowest")]
    return ["## Tests on this hardware", "", "Test tiers run on the study's own machine, each kept in `tests/`:", "",
            *[f"- {test_line(t)}" for t in tests], *slow, ""]


def reproduction_verdict(report_md: str) -> tuple[str, str]:
    """(the yardstick's name, the verdict line) of a reproduction report (report/compare/reproduction.py)."""
    title = re.match(r"# Reproduction of `([^`]+)` by ", report_md)
    verdict = next((line for line in report_md.splitlines() if line.startswith("**")), None)
    if not title or not verdict:
        raise ValueError("not a reproduction report (report/compare/reproduction.py): no title or no verdict line")
    return title[1], verdict


def _reproduction(report_md: str | None) -> list[str]:
    if report_md is None:
        return []
    yardstick, verdict = reproduction_verdict(report_md)
    return ["## Reproduction", "", f"Against `{yardstick}` (config `yardstick`; `reproduction.md` gives each "
            f"configuration and the rule): {verdict}", ""]


def _abstract(paper_md: str) -> list[str]:
    """The paper's abstract, as rendered (its table references point into paper.md)."""
    lines = paper_md.splitlines()
    start = lines.index("## Abstract") + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("## "))
    return "\n".join(lines[start:end]).strip().splitlines()


VERSIONS = (("torch", "torch"), ("triton", "triton"), ("cuda", "CUDA"), ("python", "Python"), ("driver", "driver"))


def _known(v) -> str | None:
    """A value of environment.json as text (several joined), or None where it holds none (None, "", [])."""
    if v in (None, "None", "", []) or v != v:
        return None
    return ", ".join(map(str, v)) if isinstance(v, list) else str(v)


def versions(env: dict) -> str:
    """The versions environment.json records, and what it has none of said in words ('torch 2.13.0+cpu, Python
    3.11.7; no triton, CUDA or driver'): never an empty list."""
    have = [f"{name} {_known(env.get(k))}" for k, name in VERSIONS if _known(env.get(k))]
    absent = [name for k, name in VERSIONS if not _known(env.get(k))]
    return ", ".join(have) + (f"; no {join(absent, 'or')}" if absent else "")


def build(records: pd.DataFrame, env: dict, facts: dict, calls: list[dict], paper_md: str, rebuild: str,
          time_lines: list[str], logs: str | Path | None = None, tests: list[dict] = (),
          reproduction: str | None = None, in_progress: int | None = None) -> str:
    devices = env.get("device_name")
    gpus = ", ".join(devices) if isinstance(devices, list) else devices
    days = sorted({c["start_utc"][:10] for c in calls})
    when = f", {days[0]}" + (f" to {days[-1]}" if len(days) > 1 else "") if days else ""
    status = ", ".join(f"{n} {s}" for s, n in sorted(env.get("statuses", {}).items()))
    cells = records.groupby(list(record.CONFIGURATION_KEYS)).ngroups
    lines = [
        f"# Study on {gpus}{when}",
        "",
        "Generated from this directory's files by the study's pipeline (rule `study_readme`); do not edit.",
        "",
        "## What it holds",
        "",
        f"- {len(records)} run records ({status}) of {cells} configurations under `runs/`, the parity checks under "
        "`parity/`, the peak and method checks, and the summary, claims, figures and paper made from them.",
        f"- Code: {_code(records)}.",
        f"- Hardware and versions: {gpus}; {versions(env)}; CPU {_known(env.get('cpu_model')) or 'not recorded'}.",
        f"- Data: {facts.get('description', facts.get('source'))}.",
        "",
        "## Headline (the paper's abstract; its tables are in the paper)",
        "",
        *_abstract(paper_md),
        "",
        "The paper: `paper.md`, `paper.tex`, `paper.pdf`; every number in it comes from `summary.csv`.",
        "",
        "## How it was run",
        "",
        *_calls(calls, logs, in_progress),
        "",
        *_tests(list(tests)),
        *_reproduction(reproduction),
        "## Where the time went",
        "",
        *time_lines,
        "",
        "## Remaking the outputs",
        "",
        "The summary, claims, figures, paper and this README are remade from the records by the same rules:",
        "",
        f"    {rebuild}",
        "",
    ]
    return "\n".join(lines)


def write(inputs: dict, rebuild: str, out: str | Path, logs: str | Path | None = None) -> None:
    """inputs: records, environment, facts, paper (Markdown) and, where they exist, calls (calls.jsonl) and
    reproduction (reproduction.md); `logs`: where each call's Snakemake log was kept (calls/<n>.snakemake.log)."""
    records = record.table(inputs["records"])
    calls = walltime.read_calls(inputs["calls"]) if inputs.get("calls") else []
    tests = [json.loads(Path(p).read_text()) for p in inputs.get("tests", [])]
    root = Path(inputs["environment"]).parent
    text = build(records, json.loads(Path(inputs["environment"]).read_text()),
                 json.loads(Path(inputs["facts"]).read_text()), calls, Path(inputs["paper"]).read_text(), rebuild,
                 times.study_time(records, calls, logs, list(inputs["records"]) + list(inputs.get("compiles", [])), root),
                 logs, tests,
                 Path(inputs["reproduction"]).read_text() if inputs.get("reproduction") else None,
                 session.call_in_progress(Path(out).parent))
    write_text_atomic(out, text)
