"""Repairs after a crash, made only by an invocation that runs jobs and before Snakemake looks at any output;
any other invocation (a dry run, --summary, --dag) names them and changes nothing.

- a damaged output (core/calls/damaged.py: a truncated record, an empty result) is set aside under `<root>/damaged/`,
  so that the DAG finds it missing and runs its job again;
- a whole output that an interrupt left marked incomplete (core/calls/resume.py) has its mark cleared, so that the
  DAG keeps it instead of measuring it again.

A repair that the file system refuses (no write permission) ends the invocation with one line naming the path
and what is missing, and which views of the study are stale for it. Torch-free.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path

from compile_study.core.calls import damaged, resume
from compile_study.core.layout import Layout
from compile_study.core.record import RunKey


@dataclass
class Found:
    """What a study needs repaired: damaged outputs (path, why) and whole outputs marked incomplete."""

    damaged: list[tuple[str, str]] = field(default_factory=list)
    whole: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.damaged or self.whole)


def find(layout: Layout, outputs: dict[str, RunKey | None], incomplete: str | Path = resume.INCOMPLETE) -> Found:
    """Read-only: the study's damaged outputs among `outputs` (path -> run key, None for other JSON) and its whole
    outputs marked incomplete."""
    return Found(damaged.problems(outputs), resume.whole_but_marked(layout, incomplete))


def describe(found: Found) -> list[str]:
    """A dry run's lines: what an invocation that runs jobs would repair."""
    lines = [f"damaged: {path}: {why}; a run would set it aside under damaged/ and redo its job"
             for path, why in found.damaged]
    if found.whole:
        lines.append(f"a run would keep {len(found.whole)} output(s) written completely before the last run "
                     f"stopped (Snakemake marks them incomplete): {_some(found.whole)}")
    return lines


def make(found: Found, layout: Layout, incomplete: str | Path = resume.INCOMPLETE) -> list[str]:
    """Repair what `find` found -> the console's lines. A refusal of the file system is a SystemExit with one line."""
    lines = []
    for path, why in found.damaged:
        try:
            lines.append(damaged.set_aside(layout, path, why))
        except OSError as e:
            raise SystemExit(refused(e, f"cannot set aside the damaged {path} ({why})", layout)) from None
    try:
        resume.keep(found.whole, incomplete)
    except OSError as e:
        raise SystemExit(refused(e, "cannot clear Snakemake's incomplete marks", layout)) from None
    if found.whole:
        lines.append(f"kept {len(found.whole)} output(s) written completely before the last run stopped "
                     f"(Snakemake had marked them incomplete): {_some(found.whole)}")
    return lines


def refused(e: OSError, what: str, layout: Layout) -> str:
    """One line: what could not be done, on which path, for want of which permission, and what is stale for it."""
    path = e.filename or "?"
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        need = "a read-only file system" if e.errno == errno.EROFS else f"no write permission on {_directory(path)}"
    else:
        need = e.strerror or str(e)
    stale = [v for v in layout.views() if os.path.lexists(v)]
    tail = f"; {', '.join(stale)} stay as they are and may be stale" if stale else ""
    return f"{what}: {path}: {need}{tail}"


def unwritable(layout: Layout, missing: list[str]) -> str | None:
    """Where an output that a run would make cannot be written (its nearest existing directory refuses), as one
    line naming the path and the permission and the views that stay stale; None if every one can be."""
    for path in missing:
        d = Path(path).parent
        while not d.exists() and d != d.parent:
            d = d.parent
        if not os.access(d, os.W_OK | os.X_OK):
            e = OSError(errno.EACCES, os.strerror(errno.EACCES), str(d))
            return refused(e, f"cannot make {path}", layout)
    return None


def _directory(path: str) -> str:
    p = Path(path)
    return str(p if p.is_dir() else p.parent)


def _some(paths: list[str]) -> str:
    return ", ".join(paths[:3]) + (" ..." if len(paths) > 3 else "")
