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
from compile_study.report.numbers import join
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
                 times.study_time(records, calls, logs, list(inputs["records"]) + list(inputs.get("compiles", [])), root),
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
        f"{wall:.1f} min on {gpus}; how long studies take is in [docs/running.md](docs/running.md#how-long).",
        *_not_clean(env),
        *_reproduced(study),
        *_plugged(project),
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


DOCS = "../"  # a link from a page under docs/ to a path of the project
TESTED = ("<!-- tier records: generated by python -m compile_study readme; do not edit -->",
          "<!-- end of tier records -->")


def tested_block(project: Path) -> str:
    """The test tiers kept by the stored studies (their tests/<tier>.json), one line each."""
    from compile_study.core.layout import Layout

    kept = [(study, path) for study in sorted((project / "reference").glob("*/")) for path in
            Layout(str(study)).stored_test_records()]
    lines = ["Test tiers run on the stored studies' machines (`python -m pytest -m <tier> --tier-record …`):", "",
             *[f"- {study_link(study, project, DOCS)} {test_line(json.loads(Path(p).read_text()))}" for study, p in kept]]
    return "\n".join([TESTED[0], *(lines if kept else ["No stored study kept its test tiers."]), TESTED[1]])


PORTABLE = ("<!-- portable: generated by python -m compile_study readme; do not edit -->", "<!-- end of portable -->")
WAY_WORDS = {"cold": "from an empty cache", "portable": "from shipped artifacts", "warm": "from a filled cache"}


def portable_study(project: Path) -> Path | None:
    """The stored study of the built-in model with the most configurations that measured portable starts."""
    best = None
    for summary in sorted((project / "reference").glob("*/summary.csv")):
        s = pd.read_csv(summary)
        n = int(s.portable_start_s.notna().sum()) if "portable_start_s" in s else 0
        if n and not plugs_a_model(summary.parent) and (best is None or n > best[0]):
            best = (n, summary.parent)
    return best[1] if best else None


def portable_block(project: Path) -> str:
    """What each way of reaching the compiled step cost in the stored study that measured portable starts: per
    compiled configuration of a scope one trains with, its step and, from an empty cache, from shipped artifacts
    and from a filled cache, the seconds to the first compiled step and the break-even, with their intervals."""
    from compile_study.report import numbers

    study = portable_study(project)
    if study is None:
        return "\n".join([PORTABLE[0], "No stored study has measured portable starts yet: the kick-the-tires config "
                          "(above) measures them for its compiled configurations.", PORTABLE[1]])
    s = pd.read_csv(study / "summary.csv")
    env = json.loads((study / "environment.json").read_text())
    rows = s[s.portable_start_s.notna()].sort_values(["batch_size", "compile_mode", "compile_scope"])
    head = ["| batch | mode (scope) | step (ms) | " + " | ".join(
        f"start {WAY_WORDS[w]} (s) | break-even (steps)" for w in ("cold", "portable", "warm")) + " |",
        "|---:|---|---:|" + "---:|" * 6]
    for _, r in rows.iterrows():
        cells = []
        for way, be in (("cold", "break_even"), ("portable", "portable_break_even"), ("warm", "warm_break_even")):
            cells += [numbers.interval(numbers.row_iv(r, f"{way}_start"), False, numbers.seconds),
                      numbers.interval(numbers.row_iv(r, be), False, numbers.steps)]
        head.append(f"| {r.batch_size} | `{r.compile_mode}` ({r.compile_scope}) | "
                    f"{numbers.interval(numbers.row_iv(r, 'step'), False, numbers.ms)} | " + " | ".join(cells) + " |")
    p = (env.get("compile_phase") or {}).get("portable") or {}
    size = p.get("artifacts_bytes") or []
    said = (f"The artifacts were {size[0] / 1e6:.1f}–{size[1] / 1e6:.1f} MB; the portable starts' compiles missed "
            f"{p.get('fx_cache_misses', 0)} FX graph(s) and {p.get('aot_cache_misses', 0)} AOTAutograd graph pair(s) "
            f"in {p.get('starts', 0)} starts. " if size else "")
    return "\n".join([
        PORTABLE[0],
        f"Measured in the stored study {study_link(study, project)} ({env.get('device_name')}, torch {env.get('torch')}; "
        "seconds to the first compiled step net of eager's first-epoch costs, 95% intervals where three or more "
        "processes ran; a portable start ran among the compile phase's others and counts as timed):", "",
        *head, "", said + "A break-even is the start's seconds over the time a step saves against eager; its paper's "
        "\"When does compiling pay?\" says how each was charged.", PORTABLE[1]])


def documents(project: Path) -> list[Path]:
    """The project's documents that hold generated blocks: README.md and docs/*.md."""
    return [project / "README.md", *sorted((project / "docs").glob("*.md"))]


def update_documents(project: Path, study: Path) -> dict[Path, str]:
    """Each document (documents) with the generated blocks it holds replaced: the results (project_block), the
    commands' times (times.commands_block), the studies' times (times.block) and the tier records (tested_block).
    Every block must be in one document."""
    blocks = ((BEGIN, END, lambda: project_block(study, project)),
              (times.COMMANDS[0], times.COMMANDS[1], lambda: times.commands_block(project)),
              (times.BEGIN, times.END, lambda: times.block(project)), (*TESTED, lambda: tested_block(project)),
              (*PORTABLE, lambda: portable_block(project)))
    texts = {path: path.read_text() for path in documents(project)}
    for begin, end, make in blocks:
        holders = [path for path, text in texts.items() if begin in text and end in text]
        if not holders:
            raise ValueError(f"{project}: no document holds the generated block (the lines {begin!r} and {end!r})")
        block = make()
        for path in holders:
            before, rest = texts[path].split(begin, 1)
            texts[path] = before + block + rest.split(end, 1)[1]
    return texts


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

    parser = argparse.ArgumentParser(description="Regenerate the generated blocks of the project's README and docs/.")
    parser.add_argument("readme", type=Path, help="the project's README.md (docs/ beside it)")
    parser.add_argument("study", type=Path, nargs="?", help="a stored study (default: quoted_study)")
    args = parser.parse_args(argv)
    project = args.readme.resolve().parent
    study = args.study or quoted_study(project).relative_to(project)
    for path, text in update_documents(project, study).items():
        write_text_atomic(path, text)


if __name__ == "__main__":
    main()
