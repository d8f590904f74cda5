"""README text generated from a study's files, never typed.

- The study directory's README.md (rule study_readme): what the study is, which code and hardware made it, how
  it was run (each call of calls.jsonl, session.py), where its time went, its headline (the paper's abstract)
  and how to remake its outputs:

      snakemake --cores all results/cuda/README.md

- The project README's results block (between its `results:` markers): the stored study's headline cells and
  how long its grid takes, from its summary, calls and records:

      python -m compile_study readme README.md reference/<name>     # tests/test_rebuild.py checks it is current
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import yaml

from compile_study.aggregate import models, walltime
from compile_study.core import record
from compile_study.core.io import write_text_atomic
from compile_study.report import times
from compile_study.report.times import study_link


def _code(records: pd.DataFrame) -> str:
    commits = sorted({str(c) for c in records.git_commit.dropna()})
    dirty = int(records.git_dirty.fillna(True).astype(bool).sum())
    state = ("clean tree: every record says `git_dirty: false`" if dirty == 0
             else f"**{dirty} of {len(records)} records were made from a tree with uncommitted changes**")
    if len(commits) == 1:
        return f"commit `{commits[0]}`, {state}"
    return f"**{len(commits)} commits** ({', '.join(f'`{c[:12]}`' for c in commits)}), {state}"


def _calls(calls: list[dict], logs: str | Path | None = None) -> list[str]:
    if not calls:
        return ["No call log (`calls.jsonl`): the study was not run through `python -m compile_study session`."]
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
        command = (f"`{' '.join(c['command'])}`" if c.get("command") else
                   f"not seen: logged afterwards from its Snakemake log `{c.get('adopted')}`")
        rows.append(f"| {c['call']} | {c['start_utc']} | {c['wall_s'] / 60:.1f} min | {estimate} | {status} "
                    f"| {host} | {command} |")
    total = sum(c["wall_s"] for c in calls)
    rows += ["", f"{len(calls)} call(s), {total / 60:.1f} min of wall time in all (each call's Snakemake log is "
                 "under `logs/calls/`)."]
    return rows


def _time(records: pd.DataFrame, calls: list[dict], logs: str | Path | None, paths: list[str], root) -> list[str]:
    """Every second of the logged calls by part (walltime.py), the runs' fixed cost, and the runs by mode."""
    out = []
    logged, parts = walltime.study_breakdown(calls, logs, paths, root) if logs else ([], {})
    if logged:
        wall = sum(c["wall_s"] for c in logged)
        beside = (" A run's load beside another job's work (config `overlap_loads`) is that job's second; its seconds "
                  "are shown apart, not in the sum." if walltime.OVERLAPPED in parts else "")
        out += [f"Every second of {len(logged)} logged call(s), {wall / 60:.1f} min: each second goes to the jobs "
                "running in it (split evenly where several run at once) or, where none runs, to Snakemake itself "
                "(its start, DAG, bookkeeping between jobs, exit); a run's share is split by its record's parts "
                f"(`overhead_s`).{beside}", "", *walltime.table(parts, wall), ""]
    fixed = records.apply(lambda r: record.fixed_cost_s({k: r[f"overhead_{k}"] for k in record.OVERHEAD}), axis=1)
    if fixed.notna().any():
        out += [f"Fixed cost of a run (its wall time less compile, the timed protocol and the evidence passes): "
                f"median {fixed.median():.2f} s over {int(fixed.notna().sum())} runs.", ""]
    if records.overhead_total_s.notna().any():
        by_mode = records.groupby("compile_mode").overhead_total_s.agg(["count", "sum", "mean"])
        out += ["| compile mode | runs | seconds | per run |", "|---|---:|---:|---:|"]
        out += [f"| {m} | {int(r['count'])} | {r['sum']:.0f} | {r['mean']:.0f} |" for m, r in by_mode.iterrows()]
    return out or ["The records predate the per-run breakdown of wall time."]


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
    """(the yardstick's name, the verdict line) of a reproduction report (report/reproduction.py)."""
    title = re.match(r"# Reproduction of `([^`]+)` by ", report_md)
    verdict = next((line for line in report_md.splitlines() if line.startswith("**")), None)
    if not title or not verdict:
        raise ValueError("not a reproduction report (report/reproduction.py): no title or no verdict line")
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


def build(records: pd.DataFrame, env: dict, facts: dict, calls: list[dict], paper_md: str, rebuild: str,
          time_lines: list[str], logs: str | Path | None = None, tests: list[dict] = (),
          reproduction: str | None = None) -> str:
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
        f"- Hardware and versions: {gpus}; torch {env.get('torch')}, triton {env.get('triton')}, CUDA "
        f"{env.get('cuda')}, Python {env.get('python')}, driver {env.get('driver')}; CPU {env.get('cpu_model')}.",
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
        *_calls(calls, logs),
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
                 _time(records, calls, logs, list(inputs["records"]) + list(inputs.get("compiles", [])), root),
                 logs, tests,
                 Path(inputs["reproduction"]).read_text() if inputs.get("reproduction") else None)
    write_text_atomic(out, text)


BEGIN, END = "<!-- results: generated by python -m compile_study readme; do not edit -->", "<!-- end of results -->"


def project_block(study: Path, project: Path) -> str:
    """The stored study's headline cells (bf16, static, module scope) and its run time, as README Markdown."""
    from compile_study.core import grid
    from compile_study.core.layout import Layout
    from compile_study.report import numbers
    from compile_study.report.paper import term

    summary = pd.read_csv(study / "summary.csv")
    env = json.loads((study / "environment.json").read_text())
    calls = walltime.read_calls(study / "calls.jsonl")
    head = summary[(summary.precision == "bf16") & (summary.shape_regime == "static")
                   & summary.compile_scope.isin(["module", "step-graph"]) & (summary.compile_mode != "eager")]
    rows = ["| batch | mode (scope) | step (ms) | vs eager, same process [interval] (method) | verdict against the A/A band |",
            "|---:|---|---:|---|---|"]
    for r in head.sort_values(["batch_size", "steady_step_ms"], ascending=[True, False]).itertuples():
        scope = "" if r.compile_scope == "module" else f" ({r.compile_scope})"
        rows.append(f"| {r.batch_size} | `{r.compile_mode}`{scope} | {numbers.ms(r.steady_step_ms)} "
                    f"| {numbers.row_interval(r)} | {term('verdict_cell', code=r.verdict)} |")
    runs = grid.expand(grid.load_config([study / "config.yaml"])["grids"]["cuda"])  # the study's own grid
    done = len(Layout(str(study)).stored_records())
    wall = sum(c["wall_s"] for c in calls) / 60
    gpus = f"{len(calls[0]['gpus'])}× {calls[0]['gpus'][0]}" if calls and calls[0]["gpus"] else env.get("device_name")
    lines = [
        BEGIN,
        f"From the stored study [`{study.name}`]({study.as_posix()}/README.md) ({env.get('device_name')}, torch "
        f"{env.get('torch')}; its README says how it was made and what it lacks; its paper: "
        f"[`paper.md`]({study.as_posix()}/paper.md), [`paper.pdf`]({study.as_posix()}/paper.pdf)). Compiled "
        "training steps in bf16, static shapes:",
        "",
        *rows,
        "",
        f"That study ran {done} of the {len(runs)} runs of its own GPU grid in {len(calls)} call(s), "
        f"{wall:.1f} min on {gpus}; how long studies take is under [How long](#how-long).",
        *_not_clean(env),
        *_reproduced(study),
        *_plugged(project),
        *_tested(project),
        END,
    ]
    return "\n".join(lines)


def plugs_a_model(study: Path) -> bool:
    """Whether a stored study measured a plugged model (its config.yaml), not the built-in one."""
    return models.is_plugged(yaml.safe_load((study / "config.yaml").read_text()) or {})


def _plugged(project: Path) -> list[str]:
    """One sentence per stored study of a plugged model: its speedups against the built-in model's on the cells
    both ran, the built-in study being the stored one of the same device with the most such cells (the most
    recently run of those)."""
    studies = [p.parent for p in sorted((project / "reference").glob("*/summary.csv"))]
    plugged = [s for s in studies if plugs_a_model(s)]
    lines = []
    for study in plugged:
        device = json.loads((study / "environment.json").read_text()).get("device_type")
        others = [s for s in studies if s not in plugged
                  and json.loads((s / "environment.json").read_text()).get("device_type") == device]
        newest = {s: max((c["start_utc"] for c in walltime.read_calls(s / "calls.jsonl")), default="") for s in others}
        best = max(((models.compare_studies(study, s), s) for s in others),
                   key=lambda x: (x[0]["cells"], newest[x[1]]), default=(None, None))
        got, builtin = best
        if not got or not got["cells"]:
            continue
        lo, hi = got["lowest"]["ratio"], got["highest"]["ratio"]
        overlap = (f"; in {got['intervals_overlap']} of the {got['with_intervals']} cell(s) with an interval on both sides "
                   "the two intervals overlap" if got["with_intervals"] else "; no cell has an interval on both sides")
        lines.append(f"A plugged model, `{got['plugged_model']}` ({study_link(study, project)}): on the "
                     f"{got['cells']} compiled cells it shares with {study_link(builtin, project)}, its speedups are {lo:.2f} to {hi:.2f} times the built-in "
                     f"model's (median {got['median_ratio']:.2f}; higher in {got['plugged_higher']} of "
                     f"{got['cells']}){overlap} (`python -m compile_study compare-models`).")
    return ["", *lines] if lines else []


def _reproduced(study: Path) -> list[str]:
    """The verdict of the study's reproduction report, where it has one."""
    report = study / "reproduction.md"
    if not report.is_file():
        return []
    yardstick, verdict = reproduction_verdict(report.read_text())
    return [f"Its [reproduction report]({report.as_posix()}) against `{yardstick}`: {verdict}"]


def _not_clean(env: dict) -> list[str]:
    """Said beside the headline where records of the study were made from a tree with uncommitted changes."""
    dirty = env.get("dirty_records") or 0
    if not dirty:
        return []
    return [f"{dirty} of its {env.get('n_records')} records were made from a tree with uncommitted changes, so it "
            "is not a reference study (one made from one clean commit); its numbers stand as measured."]


def _tested(project: Path) -> list[str]:
    """The test tiers kept by the stored studies (their tests/<tier>.json), one line each."""
    from compile_study.core.layout import Layout

    kept = [(study, path) for study in sorted((project / "reference").glob("*/")) for path in
            Layout(str(study)).stored_test_records()]
    if not kept:
        return []
    return ["", "Test tiers run on the stored studies' machines (`python -m pytest -m <tier> --tier-record …`):", "",
            *[f"- {study_link(study, project)} {test_line(json.loads(Path(p).read_text()))}" for study, p in kept]]


def update_project_readme(readme: Path, study: Path) -> str:
    """README with its generated blocks replaced: the results (project_block) and the times (times.block)."""
    text = readme.read_text()
    for begin, end, make in ((BEGIN, END, lambda: project_block(study, readme.parent)),
                             (times.BEGIN, times.END, lambda: times.block(readme.parent))):
        if begin not in text or end not in text:
            raise ValueError(f"{readme}: no generated block (the lines {begin!r} and {end!r})")
        before, rest = text.split(begin, 1)
        text = before + make() + rest.split(end, 1)[1]
    return text


def quoted_study(project: Path) -> Path:
    """The stored GPU study the project README quotes: of those under reference/ run through session.py on the
    built-in model (a plugged model's study answers another question), the one with the most run records."""
    from compile_study.core.layout import Layout

    studies = [p.parent for p in (project / "reference").glob("*/calls.jsonl")
               if json.loads((p.parent / "environment.json").read_text()).get("device_type") == "cuda"
               and not plugs_a_model(p.parent)]
    if not studies:
        raise SystemExit(f"{project}/reference: no stored GPU study of the built-in model with a calls.jsonl to quote")
    return max(studies, key=lambda s: (len(Layout(str(s)).stored_records()), s.name))


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Regenerate the results block of the project's README.")
    parser.add_argument("readme", type=Path, help="the project's README.md")
    parser.add_argument("study", type=Path, nargs="?", help="a stored study (default: quoted_study)")
    args = parser.parse_args(argv)
    readme = args.readme.resolve()
    study = args.study or quoted_study(readme.parent).relative_to(readme.parent)
    write_text_atomic(readme, update_project_readme(readme, study))


if __name__ == "__main__":
    main()
