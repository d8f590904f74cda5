"""A busy neighbour on the cores during a tiny study's timed run: the run is flagged, redone, and counted in the
paper; the runs the neighbour did not touch are flagged exactly where their own readings exceed the limits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml

from compile_study.core.disturbance import Limits, judge

from .test_resilience import tiny_study, with_sitecustomize

pytestmark = pytest.mark.dag

# Loaded by every Python process of the test's study (via PYTHONPATH): the study's first steady-state block asks
# the test for its neighbour and waits until it spins before the block's first reading of the host, and waits
# until it is gone after the last, so that the neighbour loads that block alone (a redo, every other run and every
# other block find the host as it is); that window names every outside process, not only the busiest few.
HANDSHAKE = '''
import os, time
from contextlib import contextmanager
from pathlib import Path
from compile_study.measure.process import hostwatch

_window = hostwatch.HostWatch.window
SIGNALS = Path(os.environ["COMPILE_STUDY_TEST_SIGNALS"])


def _wait(name):
    deadline = time.time() + 300
    while not (SIGNALS / name).exists():
        if time.time() > deadline:
            raise TimeoutError(f"the test never wrote {name}")
        time.sleep(0.02)


@contextmanager
def window(self, name, clock=None):
    first = False
    if name == "block":
        try:
            (SIGNALS / "start").open("x").close()  # the study's first steady-state block only
            first = True
        except FileExistsError:
            pass
    if first:
        _wait("up")
        self.named = 1000
    try:
        with _window(self, name, clock):
            yield
    finally:
        if first:
            (SIGNALS / "stop").touch()
            _wait("down")


hostwatch.HostWatch.window = window
'''
SPIN = "while True: pass"


def _neighbours(n: int) -> list[psutil.Process]:
    """n busy processes of this test's own (not of the study's process tree), spinning once this returns."""
    procs = [psutil.Process(subprocess.Popen([sys.executable, "-c", SPIN]).pid) for _ in range(n)]
    deadline = time.time() + 60
    while time.time() < deadline and not all(sum(p.cpu_times()[:2]) > 0.02 for p in procs):
        time.sleep(0.02)
    return procs


def _run_with_neighbour(cmd: list[str], tmp_path: Path, env: dict, signals: Path) -> tuple[int, dict, list[float]]:
    """The study, its first steady-state block loaded by one busy process per core -> (exit status, each one's
    pid -> CPU seconds when it was stopped, [when they all spun, when they were gone])."""
    out = open(tmp_path / "snakemake.out", "w")
    study = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    neighbours, spent, spun, deadline = [], {}, [], time.time() + 900
    try:
        while study.poll() is None and time.time() < deadline:
            if (signals / "start").exists() and not (signals / "up").exists():
                neighbours = _neighbours(len(os.sched_getaffinity(0)))
                spun = [time.time()]
                (signals / "up").touch()
            if (signals / "stop").exists() and not (signals / "down").exists():
                spent = {p.pid: sum(p.cpu_times()[:2]) for p in neighbours}  # bounds its time inside the window
                for p in neighbours:
                    p.kill()
                psutil.wait_procs(neighbours, timeout=10)
                spun.append(time.time())
                (signals / "down").touch()
            time.sleep(0.02)
    finally:
        for p in neighbours:
            if p.is_running():
                p.kill()
        if study.poll() is None:
            study.kill()
        out.close()
    return study.wait(), spent, spun


def test_a_busy_neighbour_flags_the_run_it_loads_which_is_redone_and_counted(tmp_path):
    signals = tmp_path / "signals"
    signals.mkdir()
    env = with_sitecustomize(tmp_path, HANDSHAKE) | {"COMPILE_STUDY_TEST_SIGNALS": str(signals)}
    cmd = tiny_study(tmp_path, [8, 16])
    cmd[cmd.index("--cores") + 1] = "1"  # one torch thread: a tiny step on two threads of a busy host crawls
    cfg = yaml.safe_load((tmp_path / "config.yaml").read_text())
    cfg["grids"]["cpu"][0] |= {"timed_steps": 120, "interleave_chunk": 20}  # blocks well above the counters' ticks
    # one redo: the neighbour's run is redone once; a run that other work on a shared host disturbs is too
    cfg["disturbance"] = {"redos": 1}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    limits = Limits.of(cfg["disturbance"])

    rc, neighbours, spun = _run_with_neighbour(cmd, tmp_path, env, signals)
    log = (tmp_path / "snakemake.out").read_text()
    assert rc == 0, log[-3000:]
    assert neighbours and (signals / "down").exists()

    records = {p: json.loads(p.read_text()) for p in sorted((tmp_path / "results/cpu/runs").rglob("r*.json"))}
    assert len(records) == 2
    # the block the neighbour loaded (its window lies inside the neighbour's spinning) is a kept, flagged first attempt
    attempts = [a for r in records.values() for a in [*r["earlier_attempts"], r]]
    [first] = [a for a in attempts if spun[0] <= a["metrics"]["host_load"]["block"]["unix"][0]
               and a["metrics"]["host_load"]["block"]["unix"][1] <= spun[1]]
    assert any(first is r["earlier_attempts"][0] for r in records.values() if r["earlier_attempts"])
    block = first["metrics"]["host_load"]["block"]
    assert "cpu-load" in first["disturbed"]["reasons"] and block["outside_cores"] > limits.max_outside_cores, block
    # the evidence names each neighbour process with its CPU time inside the block's window, which the block's
    # outside time holds (up to the counters' ticks)
    named = {pid: cpu for pid, _, cpu in first["disturbed"]["busiest"]}
    assert set(neighbours) <= set(named), (named, neighbours)
    assert all(0.1 < named[pid] <= spent + 0.01 for pid, spent in neighbours.items()), (named, neighbours)
    inside = sum(named[pid] for pid in neighbours)
    assert block["outside_cpu_s"] + block["resolution_cpu_s"] + 0.1 >= inside, (block, neighbours)
    assert block["outside_cpu_s"] > 0.5 * block["wall_s"]  # at least half a core of the block went elsewhere
    assert "redoing it, 1 of at most 1" in log
    # every attempt, the neighbour's or not, is flagged exactly when its own readings exceed the limits
    for a in attempts:
        assert (a["disturbed"] is not None) == (judge(a, limits) is not None)
        assert a["metrics"]["host_load"]["block"]["wall_s"] > 0
    quiet = [a for a in attempts if a is not first]
    print(f"quiet attempts flagged: {sum(a['disturbed'] is not None for a in quiet)} of {len(quiet)}; "
          f"their outside load: {[round(a['metrics']['host_load']['block']['outside_cores'], 3) for a in quiet]} cores")
    # a run is redone only while it is disturbed, at most `redos` times
    for r in records.values():
        assert all(e["disturbed"] is not None for e in r["earlier_attempts"])
        assert len(r["earlier_attempts"]) <= limits.redos

    summary = pd.read_csv(tmp_path / "results/cpu/summary.csv")
    assert summary.redone_n.sum() == sum(bool(r["earlier_attempts"]) for r in records.values())
    assert summary.disturbed_n.sum() == sum(r["disturbed"] is not None for r in records.values())
    after_load = sum(bool(r["earlier_attempts"]) and r["earlier_attempts"][0]["disturbed"]["reasons"][0] != "aa-stray"
                     for r in records.values())
    paper = (tmp_path / "results/cpu/paper.md").read_text()
    assert f"This study has {after_load} run{'s' if after_load != 1 else ''} redone after outside load" in paper
    environment = json.loads((tmp_path / "results/cpu/environment.json").read_text())
    assert environment["disturbance"]["recorded"] == 2 and environment["disturbance"]["redone_runs"] >= 1
