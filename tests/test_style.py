"""The style checks CI runs (`.ci/run`: snakefmt, ruff, hadolint) pass here too, read from `.ci/run` itself,
so that a tier run before a commit fails where CI would.

    python -m pytest tests/test_style.py
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # the fast tier: offline, a few seconds

REPO = Path(__file__).resolve().parents[1]
TOOLS = ("snakefmt", "ruff", "hadolint")


def ci_style_commands() -> list[list[str]]:
    """The lines of `.ci/run` that call a style tool from the venv, as argument lists."""
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    pattern = re.compile(r"^\.venv/bin/({})\s".format("|".join(TOOLS)))
    return [shlex.split(line) for line in lines if pattern.match(line)]


def test_ci_names_every_style_tool():
    assert sorted(Path(cmd[0]).name for cmd in ci_style_commands()) == sorted(TOOLS)


@pytest.mark.parametrize("cmd", ci_style_commands(), ids=lambda cmd: Path(cmd[0]).name)
def test_ci_style_check_passes(cmd):
    tool = Path(sys.executable).parent / Path(cmd[0]).name
    if not tool.exists():
        tool = shutil.which(Path(cmd[0]).name)
    if tool is None:
        pytest.skip(f"{Path(cmd[0]).name} is not installed (locks/dev.txt pins it)")
    done = subprocess.run([str(tool), *cmd[1:]], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)} fails:\n{done.stdout}{done.stderr}"
