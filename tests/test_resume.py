"""An output written completely is kept whatever the moment of an interrupt: Snakemake's incomplete mark on it is
cleared before the DAG is built; anything that does not read as a whole keeps its mark and is remade."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compile_study.core import record
from compile_study.core.calls import resume
from compile_study.core.layout import Layout
from compile_study.core.record import RunConfig, RunKey

pytestmark = pytest.mark.unit


def write_run(root: Path, key: RunKey, *, trace: bool = True, config_key: RunKey | None = None) -> str:
    layout = Layout(str(root))
    path = Path(layout.record(key))
    path.parent.mkdir(parents=True, exist_ok=True)
    cfg = RunConfig(**(config_key or key)._asdict())
    path.write_text(json.dumps(record.new(cfg, {}, {"device_type": "cpu"})))
    if trace:
        Path(str(path)[: -len(".json")] + ".trace.json.gz").write_bytes(b"")
    return str(path)


def mark(incomplete: Path, *paths: str) -> None:
    for p in paths:
        m = resume.marker(p, incomplete)
        m.parent.mkdir(parents=True, exist_ok=True)
        m.write_text("{}")


def test_whole_outputs_lose_their_mark_and_broken_ones_keep_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    incomplete = tmp_path / ".snakemake/incomplete"
    root = Path("results/cpu")
    key = RunKey("eager", "module", 8, "static", "fp32", 0)
    whole = write_run(root, key)
    no_trace = write_run(root, key.with_repeat(1), trace=False)
    wrong = write_run(root, key.with_repeat(2), config_key=key)  # a record that is not its path's run
    torn = Layout(str(root)).record(key.with_repeat(3))
    Path(torn).write_text('{"schema_version": 4, "config"')  # not a whole JSON document
    parity = root / "parity/fp32/default.json"
    parity.parent.mkdir(parents=True)
    parity.write_text('{"loss_ok": true}')
    running = Layout(str(root)).record(key.with_repeat(4))  # its job is still measuring: no file yet
    traces = [p[: -len(".json")] + ".trace.json.gz" for p in (whole, no_trace, wrong, torn, running)]
    mark(incomplete, whole, no_trace, wrong, torn, running, str(parity), *traces, "results/cpu/summary.csv")

    kept = resume.whole_but_marked(Layout(str(root)), incomplete)
    assert kept == sorted([whole, str(parity)]) and whole in resume.marked(incomplete)  # finding changes nothing
    resume.keep(kept, incomplete)

    left = set(resume.marked(incomplete))
    assert whole not in left and traces[0] not in left and str(parity) not in left
    assert {no_trace, wrong, torn, running, "results/cpu/summary.csv"} <= left


def test_markers_are_named_as_snakemake_names_them(tmp_path):
    long = "results/cpu/" + "x" * 400 + ".json"  # longer than a file name may be: cut into directories
    mark(tmp_path, "results/cpu/peak.json", long)
    assert resume.marked(tmp_path) == sorted(["results/cpu/peak.json", long])
    assert resume.marker(long, tmp_path).parent != tmp_path and resume.marker(long, tmp_path).is_file()
