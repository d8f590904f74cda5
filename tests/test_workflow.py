"""The real Snakemake DAG: dry runs of the shipped config, lint, and one tiny end-to-end study."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from compile_study import grid

from .conftest import AG_NEWS_DIR, REPO, TINY_MODEL


def snakemake(*args, cwd=REPO, timeout=900) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(cwd), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def job_counts(dry_run_output: str) -> dict[str, int]:
    table = dry_run_output.split("Job stats:")[1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def shipped_config() -> dict:
    """config.yaml with the schema's defaults filled in, as the workflow sees it."""
    from snakemake.utils import validate

    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    validate(cfg, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    return cfg


def test_grid_expansion_of_the_shipped_gpu_grid():
    runs = grid.expand(shipped_config()["grids"]["cuda"])
    # modes: (6 eager + 6 default + 6 reduce-overhead + 2 max-autotune) x 2 precisions x 3 repeats = 120
    # shapes: 8 regimes (3 bucket sets); eager runs 5 of them (not dynamic-true/false/marked);
    #   (5 + 8 + 8) x 2 batch sizes x 3 repeats = 126, of which 18 (static bf16, batch 64/256) are in modes
    assert len(runs) == 120 + 126 - 18
    assert ("max-autotune", 128, "static", "bf16", 0) not in runs  # max-autotune only at 64 and 512
    assert ("eager", 64, "dynamic-true", "bf16", 0) not in runs and ("eager", 64, "dynamic", "bf16", 0) in runs
    assert ("default", 256, "bucketed-64-128", "bf16", 2) in runs
    assert runs[("default", 64, "static", "bf16", 0)]["sub_grid"] == "modes"


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_dry_run_lists_every_stage_and_the_whole_grid(device, tmp_path):
    grids = shipped_config()["grids"][device]
    res = snakemake("-n", "--config", f"device={device}", "--configfile", str(REPO / "config.yaml"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    counts = job_counts(res.stdout)
    assert counts["train_run"] == len(grid.expand(grids))
    for rule in ("prepare_data", "measure_peak", "summarize", "figures", "paper"):
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
    cfg["grids"]["cpu"] = [{"name": "tiny", "compile_mode": ["eager", "default"], "batch_size": [16],
                            "shape_regime": ["static"], "precision": ["fp32"], "repeats": 1, "warmup_steps": 2,
                            "timed_steps": 6, "interleave_chunk": 3, "max_epoch_steps": 4}]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    profile = ["--workflow-profile", str(REPO / "profiles" / "default"), "--cores", "2"]
    res = snakemake(*profile, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]

    records = {p.parent.parent.name: json.loads(p.read_text()) for p in (tmp_path / "results/cpu/runs").rglob("*.json")}
    assert set(records) == {"eager", "default"} and all(r["status"] == "ok" for r in records.values())
    assert records["default"]["metrics"]["graphs_compiled"] == 1 and records["eager"]["metrics"]["graphs_compiled"] == 0
    m = records["default"]["metrics"]
    summary = pd.read_csv(tmp_path / "results/cpu/summary.csv").set_index("compile_mode")
    assert summary.loc["default", "speedup"] == pytest.approx(m["in_process_speedup"])

    paper = (tmp_path / "paper/paper.md").read_text()
    assert "A CPU run" in paper and "CPU numbers" in paper
    assert ("AG News test split (7,600 rows)" if real else "SYNTHETIC") in paper
    row = f"| fp32 | 16 | default | 1/1 | {m['steady_step_ms']:,.2f} | {m['reference_step_ms']:,.2f} | {m['in_process_speedup']:,.2f}× |"
    assert row in paper
    for name in ("speedup", "regimes", "buckets", "timeline"):
        assert (tmp_path / f"paper/figures/{name}.png").stat().st_size > 10_000
    assert "Nothing to be done" in snakemake("-n", *profile, cwd=tmp_path).stdout  # a rerun redoes nothing
