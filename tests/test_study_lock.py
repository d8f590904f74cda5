"""One invocation per study: a second is refused at once, naming the first; the lock goes with its process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compile_study.core.calls import study_lock

pytestmark = pytest.mark.unit


def hold_in_subprocess(directory: Path) -> subprocess.Popen:
    code = (f"from compile_study.core.calls import study_lock; study_lock.hold({str(directory)!r}); "
            "print('held', flush=True); import time; time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def try_to_hold(directory: Path) -> subprocess.CompletedProcess:
    code = f"from compile_study.core.calls import study_lock; study_lock.hold({str(directory)!r}); print('held')"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_a_second_holder_is_refused_with_the_first_ones_pid_until_it_dies_even_by_sigkill(tmp_path):
    first = hold_in_subprocess(tmp_path)
    try:
        t0 = time.perf_counter()
        second = try_to_hold(tmp_path)
        assert second.returncode == 1 and time.perf_counter() - t0 < 30  # refused at once, not queued
        assert f"another invocation is running this study (pid {first.pid}, started " in second.stderr
        assert f"stop it (kill {first.pid})" in second.stderr and "Traceback" not in second.stderr
    finally:
        os.kill(first.pid, signal.SIGKILL)  # no clean-up runs: the kernel drops the lock with the process
        first.wait()
    third = try_to_hold(tmp_path)
    assert third.returncode == 0 and third.stdout.strip() == "held"
    assert study_lock.holder(tmp_path) is None  # the holder of `third` has exited: nobody holds it


def test_a_dry_run_takes_no_lock_and_a_run_takes_it_before_anything_else(tmp_path):
    from types import SimpleNamespace

    def workflow(dryrun, main=True):
        return SimpleNamespace(is_main_process=main, output_settings=SimpleNamespace(dryrun=dryrun))

    first = hold_in_subprocess(tmp_path)
    try:
        study_lock.hold_for(workflow(dryrun=True), tmp_path)  # a dry run beside a running study: allowed
        study_lock.hold_for(workflow(dryrun=False, main=False), tmp_path)  # a job's own Snakemake: allowed
        with pytest.raises(SystemExit, match=f"pid {first.pid}"):
            study_lock.hold_for(workflow(dryrun=False), tmp_path)
    finally:
        first.kill()
        first.wait()


def test_the_session_refuses_a_study_that_is_running_before_it_starts_the_command(tmp_path, monkeypatch):
    from compile_study.core.calls import session

    first = hold_in_subprocess(tmp_path)
    monkeypatch.chdir(tmp_path)
    try:
        t0 = time.perf_counter()
        rc = session.main([str(tmp_path / "results/cuda"), "--", sys.executable, "-c", "open('ran', 'w')"])
        assert rc == 1 and not (tmp_path / "ran").exists() and time.perf_counter() - t0 < 0.5
        assert not (tmp_path / "results/cuda/calls.jsonl").exists()  # no call happened
    finally:
        first.kill()
        first.wait()
