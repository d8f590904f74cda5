"""A study's calls are logged: one line each in calls.jsonl, with the call's Snakemake log kept beside the jobs'."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from compile_study.core import session

pytestmark = pytest.mark.unit


def test_each_call_is_one_line_with_its_status_and_snakemake_log(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study = tmp_path / "results" / "cuda"
    log_dir = tmp_path / ".snakemake" / "log"
    log_dir.mkdir(parents=True)
    stale = log_dir / "2026-01-01T000000.000000.snakemake.log"
    stale.write_text("an older call")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    write_log = f"open('.snakemake/log/2026-11-30T000000.000000.snakemake.log', 'w').write('{'this call'}')"
    assert session.main([str(study), "--", sys.executable, "-c", write_log]) == 0
    assert session.main([str(study), "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    first, second = (json.loads(line) for line in (study / "calls.jsonl").read_text().splitlines())
    assert (first["call"], first["exit_status"], second["call"], second["exit_status"]) == (1, 0, 2, 3)
    assert first["command"][-1] == write_log and first["wall_s"] >= 0 and first["git_commit"]
    assert first["snakemake_log"] == "calls/1.snakemake.log"  # this call's log, not the stale one
    assert (tmp_path / "logs/cuda/calls/1.snakemake.log").read_text() == "this call"
    assert "snakemake_log" not in second  # that call wrote no Snakemake log
