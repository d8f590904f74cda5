"""Writes the hashed locks in locks/ from the direct pins with pip-compile (pip-tools), or checks them.

    python locks/lock.py                  # rewrite the locks; every pin its input leaves alone is kept
    python locks/lock.py --check          # exit 1 where a lock is stale or not what this would write (CI)
    python locks/lock.py --check --pins-only [--root DIR]   # the offline half (tests/test_locks.py)

Every package that CI, a venv and both images install is in a lock, pinned with the sha256 of each file
its index offers for that version and with no index named: pip takes it from wherever it is set up to look
and installs it only if the bytes match (`pip install --require-hashes -r locks/...`).

Two locks from one requirements.txt, because torch's CPU and CUDA builds are two versions to pip (2.13.0+cpu
and 2.13.0) with different dependencies (the CUDA build pulls triton and the nvidia-*/cuda-* wheels): one
hashed set cannot hold both. The CUDA lock is resolved with every package the two share held at the CPU
lock's version, so the CPU image that CI tests has the CUDA image's stack but for torch's build; hub.txt and
dev.txt are resolved on top of cpu.txt in the same way, so that they install beside either.

Written with CPython 3.11 on Linux x86_64 (CI's, a venv's and both images' Python): pip-compile evaluates
markers for the Python that runs it. The CPU lock needs a pip that offers torch's CPU build (CI's local
wheel, or PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu); the CUDA lock is resolved on PyPI alone.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# lock: (input, constraints, what it is for); written in this order, each on top of the ones before
LOCKS = {
    "cpu.txt": ("requirements.txt", [], "CI, the CPU image and a CPU-only venv: torch's CPU build"),
    "cuda.txt": (
        "requirements.txt",
        ["locks/cpu-less-torch.txt"],  # cpu.txt's pins but torch's, written by this script
        "the CUDA image and a GPU venv: PyPI's Linux torch (the CUDA build), all else as in cpu.txt",
    ),
    "hub.txt": ("requirements-hub.txt", ["locks/cpu.txt"], "the `hf` data source, beside cpu.txt or cuda.txt"),
    "dev.txt": ("requirements-dev.txt", ["locks/cpu.txt", "locks/hub.txt"], "CI's style checks and pip-compile"),
}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
PYPI_ONLY = {"cuda.txt"}  # the host's extra indexes or local wheels may offer torch's CPU build


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def input_pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            m = PIN.match(line)
            if not m:
                raise SystemExit(f"{path}: {line!r} is not a name==version pin")
            pins[norm(m[1])] = m[2]
    return pins


def lock_entries(path: Path) -> list[tuple[str, str, int, str]]:
    """(name, version, number of hashes, its `# via` annotation) for each package the lock pins."""
    entries = []
    for line in path.read_text().splitlines():
        if m := PIN.match(line):
            entries.append([norm(m[1]), m[2], 0, ""])
        elif entries and "--hash=sha256:" in line:
            entries[-1][2] += 1
        elif entries and line.startswith("    #"):
            entries[-1][3] += line
    return [tuple(e) for e in entries]


def stale_pins(root: Path) -> list[str]:
    """What makes a lock stale without asking an index: an input's pins differ from the lock's direct pins,
    a package without a hash, an index named."""
    problems = []
    for lock, (src, _, _) in LOCKS.items():
        path = root / "locks" / lock
        if not path.is_file():
            problems.append(f"locks/{lock}: missing (python locks/lock.py writes it)")
            continue
        if re.search(r"^\s*--(index-url|extra-index-url|find-links|trusted-host)", path.read_text(), re.M):
            problems.append(f"locks/{lock}: names an index or a wheel directory")
        entries = lock_entries(path)
        want = input_pins(root / src)
        have = {name: version for name, version, _, via in entries if re.search(rf"-r {re.escape(src)}\b", via)}
        for name, version in sorted(want.items()):
            got = have.get(name)
            if got is None or (got != version and got.split("+")[0] != version):  # 2.13.0+cpu is a 2.13.0
                problems.append(f"locks/{lock}: {src} pins {name}=={version}, the lock has {got or 'no such pin'}")
        problems += [f"locks/{lock}: {name} is pinned for {src}, which no longer has it" for name in sorted(set(have) - set(want))]
        problems += [f"locks/{lock}: {name}=={version} has no hash" for name, version, hashes, _ in entries if not hashes]
    return problems


def compile_lock(work: Path, lock: str) -> None:
    src, constraints, about = LOCKS[lock]
    env = dict(os.environ)
    if lock in PYPI_ONLY:
        for key in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_CONSTRAINT"):
            env.pop(key, None)
        env["PIP_CONFIG_FILE"] = os.devnull  # no config file: PyPI alone
    env["CUSTOM_COMPILE_COMMAND"] = "python locks/lock.py"  # the command each lock's header names
    cmd = [sys.executable, "-m", "piptools", "compile", "--quiet", "--generate-hashes", "--allow-unsafe",
           "--strip-extras", "--no-emit-index-url", "--no-emit-find-links", "--no-emit-trusted-host",
           "--output-file", f"locks/{lock}", src]
    for c in constraints:
        cmd += ["--constraint", c]
    done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"pip-compile for locks/{lock} failed:\n{done.stderr[-4000:]}")
    out = work / "locks" / lock
    out.write_text(f"# locks/{lock}: {about}; input {src}\n{out.read_text()}")
    if lock == "cpu.txt":
        pins = [line.split()[0] for line in out.read_text().splitlines() if PIN.match(line)]
        if not any(p.startswith("torch==") and "+cpu" in p for p in pins):
            sys.exit("this pip offers no CPU build of torch (set PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu)")
        (work / "locks" / "cpu-less-torch.txt").write_text("".join(f"{p}\n" for p in pins if not p.startswith("torch==")))


def write_locks(check: bool) -> int:
    if sys.version_info[:2] != (3, 11):
        sys.exit("run this with Python 3.11 (the images' and CI's): markers are evaluated for this Python")
    with tempfile.TemporaryDirectory() as tmp:  # the checkout is only written once every lock is made
        work = Path(tmp)
        (work / "locks").mkdir()
        for name in {src for src, _, _ in LOCKS.values()}:
            shutil.copy(ROOT / name, work / name)
        for lock in LOCKS:  # the current pins are pip-compile's preferences: it moves only what must move
            if (ROOT / "locks" / lock).is_file():
                shutil.copy(ROOT / "locks" / lock, work / "locks" / lock)
        for lock in LOCKS:
            compile_lock(work, lock)
        changed = 0
        for lock in LOCKS:
            old, new = (ROOT / "locks" / lock), (work / "locks" / lock)
            if old.is_file() and old.read_text() == new.read_text():
                continue
            changed += 1
            if check:
                old_lines = old.read_text().splitlines() if old.is_file() else []
                diff = difflib.unified_diff(old_lines, new.read_text().splitlines(), f"locks/{lock}", "pip-compile", lineterm="")
                print("\n".join(list(diff)[:60]))
            else:
                shutil.copy(new, old)
                print(f"locks/{lock}: rewritten")
    if check:
        print(f"{changed} lock(s) are not what pip-compile writes from their inputs: run python locks/lock.py"
              if changed else f"locks are what pip-compile writes from their inputs: {', '.join(LOCKS)}")
    return 1 if check and changed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 where a lock is stale")
    ap.add_argument("--pins-only", action="store_true", help="with --check: only the offline comparison of pins")
    ap.add_argument("--root", type=Path, default=ROOT, help="the project whose locks --pins-only reads")
    args = ap.parse_args()
    problems = stale_pins(args.root) if args.check else []
    for p in problems:
        print(p)
    if problems:
        print("stale lock(s): run python locks/lock.py")
        return 1
    if args.check and args.pins_only:
        print(f"locks current with their inputs (pins): {', '.join(LOCKS)}")
        return 0
    return write_locks(args.check)


if __name__ == "__main__":
    sys.exit(main())
