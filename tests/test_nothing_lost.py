"""A real tiny study: a second invocation is refused before it runs a job, and a damaged or deleted record is
redone by the next invocation, whose summary shows the new records only."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from compile_study.core import record
from compile_study.core.calls import study_lock

from .test_resilience import tiny_study

pytestmark = pytest.mark.dag

RUNS = "results/cpu/runs/static/fp32/eager/module"


def test_one_invocation_at_a_time_and_damaged_or_deleted_records_are_redone(tmp_path):
    cmd = tiny_study(tmp_path, [8, 16])
    first = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while study_lock.holder(tmp_path) is None and first.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert study_lock.holder(tmp_path) == first.pid  # the first holds the study from its Snakefile's first lines

    # The same command, where importing torch leaves a mark: refused at the Snakefile's first lines, it imports no
    # torch, plans nothing and builds no DAG (Snakemake's own start is most of its time). Its message may well say
    # "torch" (the first invocation's command line, e.g. an interpreter under /opt/torch/): the mark is the test.
    imported = tmp_path / "torch-imported"
    fake = tmp_path / "no-torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(f"open({str(imported)!r}, 'w').close()\nraise ImportError('no torch here')\n")
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(fake.parent), os.environ.get("PYTHONPATH")]))}
    t0 = time.perf_counter()
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    refused_s = time.perf_counter() - t0
    assert not imported.exists() and "Building DAG" not in second.stderr + second.stdout
    print(f"second invocation refused after {refused_s:.2f} s")
    assert first.poll() is None, "the first invocation should still be running"
    assert second.returncode != 0 and "Traceback" not in second.stderr
    assert f"another invocation is running this study (pid {first.pid}, started " in second.stderr
    assert "rule train_run:" not in second.stderr + second.stdout  # it started no job: no run timed beside another
    _, err = first.communicate(timeout=900)
    assert first.returncode == 0, err[-3000:]

    runs = tmp_path / RUNS
    truncated, deleted = runs / "bs8/r0.json", runs / "bs16/r0.json"
    before = {p: p.read_bytes() for p in (truncated, deleted)}
    truncated.write_bytes(before[truncated][: len(before[truncated]) // 2])
    deleted.unlink()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"damaged: {RUNS}/bs8/r0.json: incomplete or corrupt JSON" in again.stderr
    aside = tmp_path / "results/cpu/damaged/runs/static/fp32/eager/module/bs8/r0.json"
    assert aside.read_bytes() == before[truncated][: len(before[truncated]) // 2]
    assert aside.with_name("r0.json.why.txt").is_file()

    summary = pd.read_csv(tmp_path / "results/cpu/summary.csv").set_index("batch_size")
    for bs, path in ((8, truncated), (16, deleted)):  # both redone: new records, and the summary shows them
        assert path.read_bytes() != before[path]
        rec = record.read(path)
        assert rec["status"] == "ok"
        assert summary.loc[bs, "steady_step_ms"] == pytest.approx(rec["metrics"]["steady_step_ms"])
    assert Path(tmp_path / "results/cpu/paper.md").stat().st_mtime > deleted.stat().st_mtime
