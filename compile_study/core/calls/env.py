"""The environment a record was measured in: hardware, versions, code revision (torch is imported by
`collect` alone, so that torch-free callers share `git_state` and `host_facts`)."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def _run(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


CODE = Path(__file__).resolve().parents[3]  # the checkout this package runs from (not the study's directory)


def git_state() -> dict:
    """The revision of the code that runs; where the tree was copied without .git, STUDY_GIT_COMMIT names it."""
    commit = _run(["git", "-C", str(CODE), "rev-parse", "HEAD"])
    if commit is None:
        return {"git_commit": os.environ.get("STUDY_GIT_COMMIT", "unknown"), "git_dirty": None}
    status = _run(["git", "-C", str(CODE), "status", "--porcelain", "--untracked-files=no"])
    return {"git_commit": commit, "git_dirty": bool(status)}


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def host_facts(device_type: str) -> dict:
    """What every run of one study process shares: the host, the installed versions, the code's revision.

    Asked once (the launcher passes it to each run's process), since the git and nvidia-smi calls and the
    triton import it replaces cost a run a second or more on a GPU host.
    """
    facts = {
        "device_type": device_type,
        "device_name": cpu_model(),
        "torch": _version("torch"),
        "triton": _version("triton") or _version("pytorch-triton"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "executable": sys.executable,
        **git_state(),
    }
    if device_type == "cuda":
        facts["driver"] = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "--id=0"])
    return facts


def test_session(outcomes: dict[str, int], wall_s: float, markexpr: str, args: list[str],
                 interrupted: bool = False, workers: int | None = None, not_passed: list[str] | None = None,
                 durations: dict[str, float] | None = None, slowest: int = 10,
                 skipped_why: dict[str, int] | None = None) -> dict:
    """One pytest session's outcome where it ran: counts per outcome, wall time, the tier (`-m`), the command,
    whether it was interrupted before its last test (a time limit's ^C: the counts are of the tests that ran),
    the test processes it ran in (pytest-xdist's workers; None: one), the tests that failed or erred by name,
    how many tests each skip reason skipped,
    the `slowest` tests by seconds (setup, call and teardown), and the hardware, versions and commit (the
    record a study keeps of its test tiers; conftest --tier-record)."""
    from datetime import UTC, datetime

    import torch

    env = collect(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    keep = ("device_type", "device_name", "torch", "triton", "cuda", "driver", "python", "cpu_model", "cpu_cores",
            "git_commit", "git_dirty")
    return {"tier": markexpr or "all", "command": " ".join(["python -m pytest", *args]),
            "date_utc": datetime.now(UTC).isoformat(timespec="seconds"), "wall_s": round(wall_s, 1),
            **{k: int(outcomes.get(k, 0)) for k in ("passed", "failed", "skipped", "error", "deselected")},
            "interrupted": interrupted, "workers": workers, "not_passed": sorted(not_passed or []),
            "skipped_why": dict(sorted((skipped_why or {}).items(), key=lambda kv: (-kv[1], kv[0]))),
            "slowest": [[nodeid, round(sec, 2)] for nodeid, sec in
                        sorted((durations or {}).items(), key=lambda kv: -kv[1])[:slowest]],
            **{k: env.get(k) for k in keep}}


def collect(device: torch.device, host: dict | None = None) -> dict:
    """host_facts (or `host`, asked earlier) and what this process and its device add."""
    import torch

    env = dict(host or host_facts(device.type)) | {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env |= {
            "device_name": props.name,
            "gpu_memory_gib": round(props.total_memory / 2**30, 1),
            "gpu_sm_count": props.multi_processor_count,
            "cudnn": torch.backends.cudnn.version(),
        }
    return env
