"""The structured trace (TORCH_TRACE) of a configuration's first cold compile and tlparse's report of it.

TORCH_TRACE is read when torch is imported, and a job's process is forked from a server that imported torch
already (measure/process/launch.py), so the trace is switched on here, for this process and this compile alone: a trace
handler of torch's own (torch._logging's LazyTraceHandler) on its trace log while the compile runs. Its lines
are kept gzipped beside the record (core/layout.py COMPILE_TRACE, bounded by TRACE_MAX_BYTES), and `tlparse`
(pip tlparse, pinned in the locks) makes its HTML report where it is installed; where it is not, the record says
why there is none. What the trace cost the compile is torch's own count (structured_logging_overhead_us).
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from compile_study.core.layout import TRACE_MAX_BYTES


@contextlib.contextmanager
def structured_trace(trace_path: str, report_dir: str):
    """Trace the compiles inside; afterwards keep the trace and its report (keep) -> a dict, filled then with what
    the record says of them."""
    from torch._logging import _internal

    with tempfile.TemporaryDirectory(prefix="torch-trace-") as raw:
        handler = _internal.LazyTraceHandler(raw)
        handler.setFormatter(_internal.TorchLogsFormatter(trace=True))
        log, old = _internal.trace_log, _internal.LOG_TRACE_HANDLER
        others = [h for h in log.handlers if isinstance(h, _internal.LazyTraceHandler)]
        for h in others:
            log.removeHandler(h)
        _internal.LOG_TRACE_HANDLER, level = handler, log.level
        log.setLevel(logging.DEBUG)
        log.addHandler(handler)
        out: dict = {}
        try:
            yield out
        finally:
            log.removeHandler(handler)
            handler.close()
            _internal.LOG_TRACE_HANDLER = old
            log.setLevel(level)
            for h in others:
                log.addHandler(h)
            out |= keep(sorted(str(p) for p in Path(raw).glob("*.log")), trace_path, report_dir)


def keep(logs: list[str], trace_path: str, report_dir: str) -> dict:
    """The trace's lines gzipped to trace_path (bounded) and tlparse's report of them -> what the record says."""
    Path(trace_path).parent.mkdir(parents=True, exist_ok=True)
    truncated = False
    with open(trace_path, "wb") as raw_out, gzip.GzipFile(fileobj=raw_out, mode="wb", mtime=0) as gz:
        for log in logs:
            with open(log, "rb") as f:
                for line in f:
                    if raw_out.tell() + len(line) > TRACE_MAX_BYTES:
                        truncated = True
                        break
                    gz.write(line)
    kept = {"trace_bytes": Path(trace_path).stat().st_size, "trace_truncated": truncated}
    return kept | tlparse(logs, report_dir)


def tlparse(logs: list[str], report_dir: str) -> dict:
    """tlparse's HTML report of the trace in report_dir -> {"tlparse": its folder} or {"tlparse_skipped": why}."""
    beside = Path(sys.executable).with_name("tlparse")  # the venv's own, where its bin/ is not on PATH
    exe = str(beside) if beside.exists() else shutil.which("tlparse")
    if exe is None:
        return {"tlparse": None, "tlparse_skipped": "tlparse is not installed (pip tlparse, pinned in the locks)"}
    if not logs:
        return {"tlparse": None, "tlparse_skipped": "the compile wrote no trace"}
    shutil.rmtree(report_dir, ignore_errors=True)
    try:  # a report that cannot be made is said, never the compile's failure
        done = subprocess.run([exe, logs[0], "-o", report_dir, "--no-browser", "--overwrite"], capture_output=True,
                              text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        shutil.rmtree(report_dir, ignore_errors=True)
        return {"tlparse": None, "tlparse_skipped": f"tlparse failed: {type(e).__name__}"}
    if done.returncode != 0:
        shutil.rmtree(report_dir, ignore_errors=True)
        return {"tlparse": None, "tlparse_skipped": f"tlparse failed: {done.stderr.strip()[-300:]}"}
    (Path(report_dir) / "raw.log").unlink(missing_ok=True)  # tlparse's copy of the trace, kept gzipped beside it
    size = sum(p.stat().st_size for p in Path(report_dir).rglob("*") if p.is_file())
    if size > TRACE_MAX_BYTES:
        shutil.rmtree(report_dir)
        return {"tlparse": None, "tlparse_skipped": f"its report ({size:,} bytes) exceeds {TRACE_MAX_BYTES:,} bytes"}
    return {"tlparse": report_dir, "tlparse_bytes": size}
