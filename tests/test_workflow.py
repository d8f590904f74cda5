"""The real Snakemake DAG: dry runs of the shipped config, lint, and one tiny end-to-end study."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from .conftest import AG_NEWS_DIR, REPO, TINY_MODEL


def snakemake(*args, cwd=REPO, timeout=900) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(cwd), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def job_counts(dry_run_output: str) -> dict[str, int]:
    table = dry_run_output.split("Job stats:")[1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_dry_run_lists_every_stage_and_the_whole_grid(device, tmp_path):
    grid = yaml.safe_load((REPO / "config.yaml").read_text())["grids"][device]
    res = snakemake("-n", "--config", f"device={device}", "--configfile", str(REPO / "config.yaml"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    counts = job_counts(res.stdout)
    per_precision_regime = sum(
        1 for m in grid["compile_mode"] for bs in grid["batch_size"]
        if m != "max-autotune" or not grid.get("max_autotune_batch_sizes") or bs in grid["max_autotune_batch_sizes"]
    )
    expected_runs = per_precision_regime * len(grid["precision"]) * len(grid["shape_regime"]) * grid["repeats"]
    assert counts["train_run"] == expected_runs
    for rule in ("prepare_data", "summarize", "figure_speedup", "paper"):
        assert counts[rule] == 1


def test_lint_is_clean():
    res = snakemake("--lint")
    assert res.returncode == 0 and "Lints for" not in res.stdout + res.stderr, res.stdout + res.stderr


@pytest.mark.e2e
def test_tiny_study_end_to_end(tmp_path):
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    real = (AG_NEWS_DIR / "test.csv").is_file()
    cfg["data"] |= {"source": "csv" if real else "synthetic", "csv_dir": str(AG_NEWS_DIR), "vocab_size": 500,
                    "max_train_rows": 400, "synthetic_rows": 600}
    cfg["model"] |= TINY_MODEL
    cfg["device"] = "cpu"
    cfg["grids"]["cpu"] = {"compile_mode": ["eager", "default"], "batch_size": [16], "shape_regime": ["static"],
                           "precision": ["fp32"], "repeats": 1, "warmup_steps": 2, "timed_steps": 6,
                           "max_epoch_steps": 4}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    profile = ["--workflow-profile", str(REPO / "profiles" / "default"), "--cores", "2"]
    res = snakemake(*profile, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]

    records = {p.parent.parent.name: json.loads(p.read_text()) for p in (tmp_path / "results/cpu/runs").rglob("*.json")}
    assert set(records) == {"eager", "default"} and all(r["status"] == "ok" for r in records.values())
    assert records["default"]["metrics"]["graphs_compiled"] >= 1 and records["eager"]["metrics"]["graphs_compiled"] == 0
    summary = pd.read_csv(tmp_path / "results/cpu/summary.csv").set_index("compile_mode")
    eager_ms, compiled_ms = (records[m]["metrics"]["steady_step_ms"] for m in ("eager", "default"))
    assert summary.loc["default", "speedup"] == pytest.approx(eager_ms / compiled_ms)

    paper = (tmp_path / "paper/paper.md").read_text()
    assert "A CPU run" in paper and "CPU numbers" in paper
    assert ("AG News test split (7,600 rows)" if real else "SYNTHETIC") in paper
    assert f"| {compiled_ms:,.2f} | {eager_ms:,.2f} | {eager_ms / compiled_ms:,.2f}× |" in paper
    assert (tmp_path / "paper/figures/speedup.png").stat().st_size > 10_000
    assert "Nothing to be done" in snakemake("-n", *profile, cwd=tmp_path).stdout  # a rerun redoes nothing
