"""A failed configuration is a result, not a crash; a killed study resumes with the same command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from compile_study.core.calls import resume
from compile_study.report import numbers

from .conftest import REPO, TINY_MODEL, interruptible

pytestmark = pytest.mark.dag

# Loaded by every Python process of the test's study (via PYTHONPATH): makes two configurations fail
# the way a real out-of-memory error and a real compiler error would.
INJECT = '''
import torch, torch._dynamo.exc
from compile_study.measure import run

_measure = run.measure

def measure(model_cfg, cfg, *args, **kwargs):
    if cfg.batch_size == 32:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (injected by the test)")
    if cfg.batch_size == 16:
        raise torch._dynamo.exc.InternalTorchDynamoError("injected compiler failure")
    return _measure(model_cfg, cfg, *args, **kwargs)

run.measure = measure
'''


# Loaded by the study's Snakemake (via PYTHONPATH): after the first run's record is written, its job lingers, so
# that an interrupt lands while the job is still finishing (Snakemake has not yet registered it as done).
LINGER = '''
import time
from compile_study.measure import jobs

_write = jobs.write_json_atomic

def write_json_atomic(path, obj):
    _write(path, obj)
    if "/runs/" in str(path):
        time.sleep(6)

jobs.write_json_atomic = write_json_atomic
'''


def with_sitecustomize(tmp_path: Path, code: str) -> dict:
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(code)
    return os.environ | {"PYTHONPATH": os.pathsep.join([str(inject), os.environ.get("PYTHONPATH", "")])}


def tiny_study(tmp_path: Path, batch_sizes: list[int], repeats: int = 1) -> list[str]:
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["data"] |= {"source": "synthetic", "synthetic_rows": 400, "vocab_size": 300}
    cfg["model"] |= TINY_MODEL
    cfg["device"] = "cpu"
    cfg["grids"]["cpu"] = [{"name": "tiny", "compile_mode": ["eager"], "batch_size": batch_sizes,
                            "shape_regime": ["static"], "precision": ["fp32"], "repeats": repeats,
                            "warmup_steps": 2, "timed_steps": 4, "interleave_chunk": 2, "max_epoch_steps": 3,
                            "phase_steps": 2, "profile_steps": 1}]
    cfg["claims"] = {"mlp": {"cpu": {"batch_sizes": []}}}  # no MLP benchmark: its claim reads "not measured"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
            "--workflow-profile", str(REPO / "profiles" / "default"), "--cores", "2"]


def test_failed_configurations_are_recorded_and_the_study_completes(tmp_path):
    env = with_sitecustomize(tmp_path, INJECT)
    cmd = tiny_study(tmp_path, [8, 16, 32])
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-3000:]

    rec = {bs: json.loads((tmp_path / f"results/cpu/runs/static/fp32/eager/module/bs{bs}/r0.json").read_text()) for bs in (8, 16, 32)}
    assert rec[8]["status"] == "ok" and rec[8]["metrics"]["steady_step_ms"] > 0
    assert rec[32]["status"] == "oom" and "out of memory" in rec[32]["error"]
    assert rec[16]["status"] == "compile_error" and "injected compiler failure" in rec[16]["error"]
    overhead = rec[8]["metrics"]["overhead_s"]  # counted by the shim from the process's creation
    assert overhead["process_start_s"] > 0 and overhead["imports_s"] > 0 and overhead["total_s"] > overhead["timed_s"]
    assert sum(v for k, v in overhead.items() if k != "total_s") == pytest.approx(overhead["total_s"], rel=0.05)
    summary = pd.read_csv(tmp_path / "results/cpu/summary.csv").set_index("batch_size")
    assert summary.loc[32, "status"] == "oom" and summary.loc[8, "status"] == "ok"
    paper = (tmp_path / "results/cpu/paper.md").read_text()
    assert "OOM at batch 32" in paper and "compile error at batch 16" in paper
    assert f"| fp32 | 8 | eager | 1/1 | {numbers.ms(rec[8]['metrics']['steady_step_ms'])} |" in paper


def test_a_killed_study_resumes_with_every_earlier_record_intact(tmp_path):
    cmd = tiny_study(tmp_path, [8, 16, 24, 32], repeats=2)
    runs = tmp_path / "results/cpu/runs"
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 900
    while time.time() < deadline and len(list(runs.rglob("r*.json"))) < 3:
        time.sleep(0.1)
    time.sleep(1.0)  # now a run is in the middle of its work
    os.killpg(proc.pid, signal.SIGKILL)  # the whole study: Snakemake, the launcher's server and the run's process
    proc.wait()
    # Every record written before the kill is whole (records are written atomically, last); one whose job
    # Snakemake had not yet registered as finished is still marked incomplete, and is kept all the same.
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in runs.rglob("r*.json")}
    assert 3 <= len(before) < 8, "the kill should land in the middle of the study"

    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)  # the same command
    assert res.returncode == 0, res.stderr[-3000:]
    after = sorted(runs.rglob("r*.json"))
    assert len(after) == 8
    for p, (content, mtime) in before.items():  # nothing measured before the kill was lost or redone
        assert p.read_bytes() == content and p.stat().st_mtime_ns == mtime
    for p in after:
        assert json.loads(p.read_text())["status"] == "ok"  # no truncated record
    assert not list(tmp_path.rglob(".*.tmp"))  # no partial file left anywhere
    assert (tmp_path / "results/cpu/paper.md").is_file()


def test_an_interrupt_while_a_job_finishes_keeps_its_record(tmp_path):
    env = with_sitecustomize(tmp_path, LINGER)
    cmd = tiny_study(tmp_path, [8, 16])
    runs = tmp_path / "results/cpu/runs"
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=interruptible)
    deadline = time.time() + 300
    while time.time() < deadline and not list(runs.rglob("r*.json")):
        time.sleep(0.1)
    time.sleep(1.0)  # the record is written; its job is still finishing
    os.killpg(proc.pid, signal.SIGINT)  # ^C at the terminal
    proc.wait(timeout=120)
    (first,) = runs.rglob("r*.json")
    before = first.read_bytes(), first.stat().st_mtime_ns
    rel = str(first.relative_to(tmp_path))
    assert rel in resume.marked(tmp_path / ".snakemake/incomplete")  # Snakemake would have thrown it away

    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)  # the same command
    assert res.returncode == 0, res.stderr[-3000:]
    assert (first.read_bytes(), first.stat().st_mtime_ns) == before  # kept, not remeasured
    assert "kept 1 output(s)" in res.stderr and len(list(runs.rglob("r*.json"))) == 2
    assert (tmp_path / "results/cpu/paper.md").is_file()


def test_a_run_that_would_not_end_before_the_time_limit_stops_the_call_and_the_next_call_runs_it(tmp_path):
    """Under `session --time-limit` (core/calls/deadline.py) a job that does not fit is not started (here the first
    timed one, the model check before the run): it fails with the reason, Snakemake starts nothing more, no
    record is written; the same command then runs it."""
    from compile_study.core.calls import deadline

    target = "results/cpu/runs/static/fp32/eager/module/bs8/r0.json"
    cmd = tiny_study(tmp_path, [8]) + [target]
    late = os.environ | {deadline.VAR: str(time.time() + 1)}  # passed by the time the run's job starts
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=late)
    assert res.returncode != 0 and ".json: not started: it takes about" in res.stderr, res.stderr[-3000:]
    assert not (tmp_path / target).exists()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)  # the next call
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads((tmp_path / target).read_text())["status"] == "ok"


def study_tree(root: Path) -> dict[str, str]:
    """Every file of a study directory -> its sha256; Snakemake's own log and the IO cache a dry run leaves for the
    next run (`.snakemake/iocache`) aside, its incomplete marks and metadata included."""
    import hashlib

    own = (".snakemake/log/", ".snakemake/iocache/")
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and not str(p.relative_to(root)).startswith(own)}


def test_planning_changes_no_file_and_the_run_makes_the_repairs(tmp_path):
    """A dry run, --summary, --dag and --lint on a study with a truncated record and a whole record an interrupt
    left marked incomplete change no file (each names what a run would do); the run then redoes the one and
    keeps the other."""
    cmd = tiny_study(tmp_path, [8], repeats=2)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    runs = tmp_path / "results/cpu/runs/static/fp32/eager/module/bs8"
    torn, whole = runs / "r1.json", runs / "r0.json"
    torn.write_bytes(torn.read_bytes()[:200])
    kept = whole.read_bytes(), whole.stat().st_mtime_ns
    incomplete = tmp_path / ".snakemake/incomplete"
    for path in (whole, runs / "r0.trace.json.gz"):
        marker = resume.marker(str(path.relative_to(tmp_path)), incomplete)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("")
    before = study_tree(tmp_path)
    for args in (["-n"], ["--summary"], ["--dag"], ["--lint"]):
        res = subprocess.run(cmd + args, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert res.returncode == 0, (args, res.stderr[-3000:])
        assert study_tree(tmp_path) == before, f"snakemake {' '.join(args)} changed the study"
    res = subprocess.run(cmd + ["-n"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert f"damaged: {torn.relative_to(tmp_path)}: incomplete or corrupt JSON" in res.stderr
    assert "a run would set it aside" in res.stderr and "a run would keep 1 output(s)" in res.stderr

    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)  # for real
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(torn.read_text())["status"] == "ok"  # redone
    aside = tmp_path / "results/cpu/damaged/runs/static/fp32/eager/module/bs8/r1.json"
    assert aside.is_file() and len(aside.read_bytes()) == 200  # the damaged copy kept, not deleted
    assert (whole.read_bytes(), whole.stat().st_mtime_ns) == kept  # kept, not remeasured
    assert "kept 1 output(s)" in res.stderr
