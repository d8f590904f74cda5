"""A full disk ends in one line naming the path and the free space, with no temporary file left behind."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compile_study.core import io
from compile_study.core.dataset import data

from .conftest import TINY_MODEL, data_cfg

pytestmark = pytest.mark.unit


def enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_is_one_line_with_the_path_and_free_space_and_no_temporary_file(tmp_path):
    target = tmp_path / "runs" / "r0.json"

    def half_then_full(tmp: Path) -> None:
        tmp.write_text('{"half": ')
        enospc()

    with pytest.raises(io.DiskFullError) as err:
        io._atomic(target, half_then_full)
    msg = str(err.value)
    assert msg.startswith(f"no space left on device writing {target} (") and " free there); " in msg
    assert "\n" not in msg and err.value.errno == errno.ENOSPC
    assert list(target.parent.iterdir()) == []  # neither the target nor a temporary


def test_data_preparation_on_a_full_disk_leaves_no_partial_array(tmp_path, monkeypatch):
    monkeypatch.setattr(np, "save", enospc)
    with pytest.raises(io.DiskFullError, match="train_ids.npy"):
        data.prepare(data_cfg(), TINY_MODEL["max_len"], tmp_path / "d", tmp_path / "hf")
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["tokenizer.json"]


def test_a_tokenizer_saved_on_a_full_disk_is_a_disk_error(tmp_path):
    class FullDiskTokenizer:  # tokenizers raises a plain Exception carrying the OS error
        def save(self, path: str) -> None:
            Path(path).write_text("{")
            raise Exception("No space left on device (os error 28)")

    with pytest.raises(io.DiskFullError, match=r"tokenizer.json \("):
        data.save_tokenizer(FullDiskTokenizer(), tmp_path / "tokenizer.json")
    assert list(tmp_path.iterdir()) == []


def test_a_trace_written_on_a_full_disk_leaves_no_temporary_and_a_killed_writers_is_cleared(tmp_path):
    from compile_study.measure import profiling

    class FullDiskProfiler:  # as kineto does: a temporary of its own beside the path it was given
        def export_chrome_trace(self, path: str) -> None:
            Path(path + ".tmp").write_text('{"traceEvents": [')
            enospc()

    trace = tmp_path / "runs" / "r0.trace.json.gz"
    with pytest.raises(io.DiskFullError, match=f"writing {trace} "):
        profiling.write_trace(FullDiskProfiler(), trace)
    assert list(trace.parent.iterdir()) == []
    stale = io.temporary(trace, ".raw").with_name(f".{trace.name}.999999999.raw.tmp")  # a killed writer's
    stale.write_text("{")
    io.write_empty_trace(trace, "failed")
    assert [p.name for p in trace.parent.iterdir()] == [trace.name]


def test_a_job_that_hits_a_full_disk_ends_in_one_line(tmp_path):
    log = tmp_path / "job.log"
    code = ("from compile_study.core.logs import redirect_output; "
            f"redirect_output({str(log)!r}); "
            "raise OSError(28, 'No space left on device', '/study/runs/r0.json')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = log.read_text().splitlines()
    assert res.returncode == 1 and len(lines) == 1
    assert lines[0].startswith("error: no space left on device writing /study/runs/r0.json (")
