"""Damaged outputs, found before Snakemake looks at any output (plan/repairs.py), so that none is summarised.

A run record is checked against its declared shape and its path's run key (record.problem); parity, peak,
MLP, method-check and facts files as complete JSON objects. In a live study a damaged file is set aside
under `<root>/damaged/` (its path below the root kept, a `.why.txt` note beside it) and the DAG redoes the
job that makes it: nothing is deleted and nothing damaged is read. A stored study's runs cannot be redone,
so its damaged records are named with the fix instead (`stored_problems`).
"""

from __future__ import annotations

import csv
import json
import os
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from compile_study.core import record
from compile_study.core.io import write_text_atomic
from compile_study.core.layout import Layout


def json_problem(path: str | Path) -> str | None:
    """What is wrong with a JSON output that is not a run record (None if nothing): empty, incomplete, not an object."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if not raw.strip():
        return f"empty file ({len(raw)} bytes)"
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return f"incomplete or corrupt JSON ({record.json_error(e)} in {len(raw):,} bytes: a truncated copy?)"
    return None if isinstance(obj, dict) else f"not a JSON object (a {type(obj).__name__})"


def problem(path: str | Path, key: record.RunKey | None) -> str | None:
    """A run record's problem (key: the run its path stands for) or, with key None, another JSON output's."""
    return record.problem(path, key) if key is not None else json_problem(path)


def problems(outputs: dict[str, record.RunKey | None]) -> list[tuple[str, str]]:
    """(path, what is wrong) for every damaged file of `outputs` (path -> its run key, None for other JSON); files
    that are not there are left to the DAG. Reads only."""
    found = []
    for path, key in outputs.items():
        if os.path.lexists(path) and (why := problem(path, key)) is not None:
            found.append((path, why))
    return found


def set_aside(layout: Layout, path: str, why: str) -> str:
    """Move a damaged file to layout.damaged, with a note -> the console's line. Raises OSError (e.g. no write
    permission) with nothing moved."""
    dest = _free_name(Path(layout.damaged) / _below_root(layout, path))
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, dest)
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    write_text_atomic(dest.with_name(dest.name + ".why.txt"),
                      f"{path}: {why}\nset aside {when}; the workflow makes it again\n")
    return f"damaged: {path}: {why}; set aside as {dest}, and the job that makes it runs again"


def stored_problems(paths: list[str]) -> str | None:
    """A stored study's damaged records, named with the fix, as one message (None if every one reads)."""
    bad = [(p, why) for p in paths if (why := record.problem(p)) is not None]
    if not bad:
        return None
    listed = "".join(f"\n  - {p}: {why}" for p, why in bad)
    return (f"{len(bad)} damaged record(s) in this stored study, whose runs cannot be redone here:{listed}\n"
            "Restore each from version control (git checkout -- <path>), or move it out of runs/ to summarise "
            "the study without it.")


def stale_views(layout: Layout, keys) -> tuple[list[str], str]:
    """The views of a live study (layout.views: summary, figures, papers, README) that show a run whose record is
    gone, and why: summary.csv counts `n` records a configuration, and fewer of the grid's (`keys`) are there.
    A summary that cannot be read counts as stale too; none when there is no summary."""
    if not Path(layout.summary).is_file():
        return [], ""
    there = Counter(k.with_repeat(0) for k in keys if os.path.exists(layout.record(k)))
    try:
        with open(layout.summary, newline="") as f:
            counted = [(record.RunKey.of(row | {"repeat": 0}), int(row["n"])) for row in csv.DictReader(f)]
    except (OSError, KeyError, ValueError, csv.Error) as e:
        counted, why = [], f"{layout.summary} cannot be read ({e})"
    else:
        gone = [(k, n) for k, n in counted if there[k] < n]
        why = (f"{layout.summary} counts {gone[0][1]} record(s) of {_name(gone[0][0])} and {there[gone[0][0]]} are "
               "there" if gone else "")
    views = [v for v in layout.views() if os.path.lexists(v)] if why else []
    return views, why


def _name(key: record.RunKey) -> str:
    return f"{key.compile_mode} {key.compile_scope} bs{key.batch_size} {key.shape_regime} {key.precision}"


def _below_root(layout: Layout, path: str) -> Path:
    root = Path(layout.root or ".")
    return Path(path).relative_to(root) if root != Path(".") else Path(path)


def _free_name(dest: Path) -> Path:
    """dest, or dest.1, dest.2, ... where an earlier damaged copy of the same file was set aside."""
    n, out = 0, dest
    while os.path.lexists(out):
        n += 1
        out = dest.with_name(f"{dest.name}.{n}")
    return out
