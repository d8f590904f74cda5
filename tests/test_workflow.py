"""The real Snakemake DAG: dry runs of the shipped config, lint, and one tiny end-to-end study."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from compile_study.aggregate.figures import figures
from compile_study.core import stats
from compile_study.core.config import grid
from compile_study.core.record import RunKey
from compile_study.report import numbers
from compile_study.report.paper import md_escape, term

from .conftest import AG_NEWS_DIR, REPO, TINY_MODEL
from .test_workflow_report import check_report


def snakemake(*args, cwd=REPO, timeout=900) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(cwd), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def job_counts(dry_run_output: str) -> dict[str, int]:
    """Jobs per rule from a dry run's "Job stats" table ({} where it had nothing to do)."""
    if "Job stats:" not in dry_run_output:
        assert "Nothing to be done" in dry_run_output, dry_run_output[-2000:]
        return {}
    table = dry_run_output.split("Job stats:")[1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def shipped_config() -> dict:
    """config.yaml with the schema's defaults filled in, as the workflow sees it."""
    from snakemake.utils import validate

    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    validate(cfg, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    return cfg


@pytest.mark.unit
def test_grid_expansion_of_the_shipped_gpu_grid():
    runs = grid.expand(shipped_config()["grids"]["cuda"])
    per_grid = {}
    for steps in runs.values():
        per_grid[steps["sub_grid"]] = per_grid.get(steps["sub_grid"], 0) + 1
    # three processes per cell (t intervals and A/A verdicts), but the one-process cell whose point is its
    # deterministic evidence; the padding grid: 2 modes x 2 regimes x 1 batch size x 3, its static cells the
    # modes grid's (a configuration named twice runs once, in the first sub-grid that names it)
    assert per_grid == {"modes": 18, "autotune": 6, "precision": 6, "fused-optimizer": 6, "fused-graphs": 3,
                        "whole-step": 6, "eager-whole-step": 6, "scopes": 6, "compiled-step": 1, "dynamic": 6,
                        "padding": 12}
    assert ("default", "module", 256, "dynamic", "bf16", 2) in runs and len(runs) == 76
    assert ("eager", "fused-adamw", 512, "static", "bf16", 2) in runs  # what fusing AdamW alone gives
    assert ("default", "step-graph", 32, "static", "bf16", 0) in runs
    assert ("eager", "eager-step-graph", 512, "static", "bf16", 2) in runs  # its control: the graph without compiling
    assert ("reduce-overhead", "module", 512, "packed", "bf16", 1) in runs
    assert ("max-autotune", "module", 512, "static", "bf16", 2) in runs  # against reduce-overhead at 512
    assert ("max-autotune-no-cudagraphs", "module", 512, "static", "bf16", 2) in runs  # against default there
    assert runs[("default", "module", 32, "static", "bf16", 0)]["sub_grid"] == "modes"
    assert runs[("reduce-overhead", "module", 512, "static", "bf16", 0)]["sub_grid"] == "modes"


@pytest.mark.unit
def test_the_shipped_max_autotune_modes_search_the_gemms_once():
    runs = grid.expand(shipped_config()["grids"]["cuda"])
    first = RunKey("max-autotune", "module", 512, "static", "bf16", 0)
    shared = {k: v["search_from"] for k, v in runs.items() if v.get("search_from")}
    assert shared == {first._replace(compile_mode="max-autotune-no-cudagraphs"): first}  # repeat 0 only
    assert "search_from" not in runs[first]  # the settings of other runs are left alone


@pytest.mark.unit
@pytest.mark.parametrize("search, modes, expected", [
    ("own", ["max-autotune", "max-autotune-no-cudagraphs"], 0),  # each mode searches for itself
    ("shared", ["eager", "max-autotune"], 0),  # one max-autotune mode: nothing to share
    ("shared", ["max-autotune-no-cudagraphs", "eager", "max-autotune"], 2),  # the first named searches
])
def test_a_gemm_search_is_shared_only_between_max_autotune_modes_of_one_sub_grid(search, modes, expected):
    runs = grid.expand([{"name": "g", "compile_mode": modes, "batch_size": [64, 512], "precision": ["bf16"],
                         "repeats": 2, "gemm_search": search}])
    shared = {k: v["search_from"] for k, v in runs.items() if v.get("search_from")}
    assert len(shared) == expected
    for key, first in shared.items():
        assert (key.compile_mode, key.repeat, first.compile_mode) == ("max-autotune", 0, modes[0])
        assert first == key._replace(compile_mode=modes[0]) and first in runs


@pytest.mark.unit
def test_one_side_scopes_run_in_default_mode_only():
    runs = grid.expand([{"name": "g", "compile_mode": ["eager", "default", "reduce-overhead"],
                         "compile_scope": ["module", "forward", "step"], "batch_size": [8], "shape_regime": ["static"],
                         "precision": ["fp32"], "repeats": 1, "warmup_steps": 1, "timed_steps": 2,
                         "max_epoch_steps": None, "interleave_chunk": 1, "recompile_limit": 8,
                         "phase_steps": 1, "profile_steps": 1}])
    assert sorted((k.compile_mode, k.compile_scope) for k in runs) == [
        ("default", "forward"), ("default", "module"), ("default", "step"), ("eager", "module"),
        ("reduce-overhead", "module"), ("reduce-overhead", "step")]


@pytest.mark.dag
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_dry_run_lists_every_stage_and_the_whole_grid(device, tmp_path):
    grids = shipped_config()["grids"][device]
    # no AG News beside tmp_path and the hub offline: a GPU study plans on the stand-in only when told to
    res = snakemake("-n", "--config", f"device={device}", "data={source: synthetic}", "--configfile",
                    str(REPO / "config.yaml"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    counts = job_counts(res.stdout)
    assert counts["train_run"] == len(grid.expand(grids))
    for rule in ("prepare_data", "measure_peak", "summarize", "figures", "paper", "study_config", "study_facts",
                 "study_readme"):
        assert counts[rule] == 1
    assert counts.get("method_check", 0) == len(shipped_config()["checks"][device])
    assert counts.get("reproduction", 0) == (device == "cuda")  # the committed GPU study is a GPU study's yardstick


@pytest.mark.dag
def test_the_mode_that_shares_a_gemm_search_waits_for_the_search(tmp_path):
    """max-autotune-no-cudagraphs compiles from max-autotune's search: the compile phase runs that search first,
    and every timed run of the mode (all warm) waits only for its own configuration's compile."""
    target = "results/cuda/runs/static/bf16/max-autotune-no-cudagraphs/module/bs512/r{}.json"
    search = "results/cuda/compiles/static/bf16/max-autotune/module/bs512/c0.json"
    for repeat in (0, 1):
        res = snakemake("-n", target.format(repeat), "--config", "device=cuda", "data={source: synthetic}", "--configfile",
                        str(REPO / "config.yaml"), cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        counts = job_counts(res.stdout)
        assert (counts["train_run"], counts["cold_compile"]) == (1, 2)  # the run; its compile and the search's
        assert f"output: {search}" in res.stdout
        assert "max-autotune/module/bs512/r0.json" not in res.stdout  # no timed run of the searching mode


@pytest.mark.dag
def test_lint_is_clean():
    res = snakemake("--lint")
    assert res.returncode == 0 and "Lints for" not in res.stdout + res.stderr, res.stdout + res.stderr


def write_tiny_config(study_dir) -> bool:
    """The tiny CPU study (eager and default at batch 16, one repeat) as study_dir/config.yaml; True on real AG News."""
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    real = (AG_NEWS_DIR / "test.csv").is_file()
    cfg["data"] |= {"source": "csv" if real else "synthetic", "csv_dir": str(AG_NEWS_DIR), "vocab_size": 500,
                    "max_train_rows": 400, "synthetic_rows": 600}
    cfg["model"] |= TINY_MODEL
    cfg["device"] = "cpu"
    cfg["grids"]["cpu"] = [{"name": "tiny", "compile_mode": ["eager", "default"], "batch_size": [16],
                            "shape_regime": ["static"], "precision": ["fp32"], "repeats": 1, "warmup_steps": 2,
                            "timed_steps": 6, "interleave_chunk": 3, "max_epoch_steps": 4}]
    cfg["claims"] = {"mlp": {"cpu": {"batch_sizes": [8], "steps": 5, "repeats": 2}}}
    # the tests' other processes share this host's cores: no run of a tiny study counts as disturbed (the rule is
    # tested on its own, with a neighbour of its own: tests/test_disturbed_study.py sets its limits)
    cfg["disturbance"] = {"max_outside_cores": os.cpu_count(), "max_aa_ratio": 1e6, "redos": 0}
    (study_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    return real


def check_tiny_paper(study_dir, real: bool) -> dict:
    """The tiny study's records are ok, and the summary and both papers show their numbers; returns the compiled run's metrics."""
    root = study_dir / "results/cpu"
    records = {p.parent.parent.parent.name: json.loads(p.read_text()) for p in (root / "runs").rglob("r0.json")}
    assert set(records) == {"eager", "default"} and all(r["status"] == "ok" for r in records.values())
    assert records["default"]["metrics"]["graphs_compiled"] == 1 and records["eager"]["metrics"]["graphs_compiled"] == 0
    m = records["default"]["metrics"]
    # its inference graph: compiled by the first cold compile after it saved the portable artifacts (which hold
    # the training step alone: the portable start found every graph it needed), loaded by the run from the cache
    c0, p0 = (json.loads((root / f"compiles/static/fp32/default/module/bs16/{n}.json").read_text()) for n in ("c0", "p0"))
    assert c0["compile"]["inference"] and not p0["compile"]["inference"] and p0["metrics"]["fx_cache_misses"] == 0
    assert c0["metrics"]["inference_prime_s"] > 0 and c0["metrics"]["inference_fx_cache_misses"] >= 1
    assert c0["metrics"]["artifacts"]["inductor"] == c0["metrics"]["fx_cache_misses"]  # the training graphs alone
    assert m["inference_fx_cache_misses"] == 0 and m["inference_fx_cache_hits"] >= 1
    summary = pd.read_csv(root / "summary.csv").set_index("compile_mode")
    assert summary.loc["default", "speedup"] == pytest.approx(m["in_process_speedup"])  # one process: its own ratio
    assert summary.loc["default", "speedup_method"] == "single run"

    paper, tex = (root / "paper.md").read_text(), (root / "paper.tex").read_text()
    assert "CPU numbers" in paper and "CPU numbers" in tex and "\\begin{document}" in tex
    assert ("AG News test split (7,600 rows)" if real else "synthetic") in paper
    speedup = f"{numbers.times(m['in_process_speedup'])} (single run)"
    verdict = md_escape(term("verdict_cell", code="few-runs"))  # no verdict from one process
    row = f"| fp32 | 16 | default | {numbers.ms(m['steady_step_ms'])} | {speedup} | {verdict} |"
    assert row in paper and speedup in tex
    return m


@pytest.mark.dag
def test_tiny_study_end_to_end(tmp_path):
    real = write_tiny_config(tmp_path)
    profile = ["--workflow-profile", str(REPO / "profiles" / "default"), "--cores", "2"]
    res = snakemake(*profile, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]

    m = check_tiny_paper(tmp_path, real)
    root = tmp_path / "results/cpu"
    runs, paper = root / "runs", (root / "paper.md").read_text()
    drawn = figures.read_index(root / "figures")
    for name in drawn:  # only figures with data are made, and the paper shows every one of them
        assert (root / f"figures/{name}.png").stat().st_size > 10_000 and f"figures/{name}.png" in paper
    assert {"speedup", "overhead"} <= set(drawn) and not (root / "figures/timeline.png").exists()
    if shutil.which("latexmk"):
        assert (root / "paper.pdf").read_bytes().startswith(b"%PDF")
    # Snakemake's own report of it: every figure drawn, with its caption; the paper; software; rules, run times
    res = snakemake(*profile, "--report", "results/cpu/report.html", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    check_report(root / "report.html", drawn, {"train_run", "summarize", "figures", "paper"})
    # where the time went: every record says, and the parts add up
    parts = {k: v for k, v in m["overhead_s"].items() if k != "total_s"}
    assert min(parts.values()) >= 0 and sum(parts.values()) == pytest.approx(m["overhead_s"]["total_s"], rel=0.05)
    # profiler evidence: a trace per run, its per-step numbers in the record and the paper
    trace = json.loads(gzip.decompress((runs / "static/fp32/default/module/bs16/r0.trace.json.gz").read_bytes()))
    assert trace["traceEvents"] and m["profile"]["kernels_per_step"] > 0
    assert m["reference_profile"]["kernels_per_step"] > m["profile"]["kernels_per_step"]  # Inductor fused ops away
    kernels = f"| fp32 | 16 | default | {numbers.count(m['profile']['kernels_per_step'])} | "
    assert kernels + f"{numbers.count(m['reference_profile']['kernels_per_step'])} |" in paper
    # the claims table: computed verdicts, the MLP benchmark measured, what the grid lacks said so
    claims = pd.read_csv(root / "claims.csv").set_index("claim")
    assert len(claims) == 6 and "## Common claims, checked" in paper
    mlp = json.loads((root / "claims/mlp.json").read_text())
    rounds = mlp["rows"][0]["proper_rounds"]
    iv = stats.speedup_interval([e / c for e, c in zip(rounds["eager_ms"], rounds["compiled_ms"])])
    assert mlp["rows"][0]["status"] == "ok" and numbers.times(iv.point) in paper  # the rounds' interval, quoted
    assert claims.loc["dynamic"].verdict == "not-measured"  # the tiny grid has no dynamic-shape run
    assert m["inference_speedup"] == pytest.approx(m["inference_reference_step_ms"] / m["inference_step_ms"])
    # the generated README: the code's commit, the abstract, where the time went
    readme = (root / "README.md").read_text()
    assert f"commit `{m_commit(runs)}`" in readme and paper.split("## Abstract")[1].split()[0] in readme
    assert "| compile mode | runs | seconds | per run |" in readme and "| default | 1 |" in readme
    assert "Nothing to be done" in snakemake("-n", *profile, cwd=tmp_path).stdout  # a rerun redoes nothing
    # a CPU study against another stored CPU study (here a copy of itself with its records re-serialised: a byte
    # for byte copy is the study itself, which says nothing): rule reproduction writes the report
    shutil.copytree(root, tmp_path / "stored", ignore=shutil.ignore_patterns("*.trace.json.gz"))
    for p in (tmp_path / "stored/runs").rglob("r*.json"):
        p.write_text(json.dumps(json.loads(p.read_text()), indent=1))
    target = "results/cpu/reproduction.csv"
    res = snakemake(*profile, target, "--config", f"yardstick={{cpu: {tmp_path / 'stored'}}}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    table = pd.read_csv(tmp_path / target)
    # one process each: the stored cell carries no verdict
    assert len(table) == 2 and set(table.reason) == {"the stored cell is too uncertain (n < 3)"}
    assert "0 of 2 shared configurations reproduced, 0 differ, 2 inconclusive" in (root / "reproduction.md").read_text()
    # the stored copy's claims judged on the study: each holds (the same runs), and the report opens with them
    from compile_study.aggregate.compare import rejudge
    from compile_study.report.compare import rejudged

    judged = rejudge.rejudge(rejudge.stored_claims(tmp_path / "stored"), rejudge.subject(root))
    assert [j["code"] for j in judged] == ["holds"] * len(judged)
    device = json.loads((root / "environment.json").read_text())["device_name"]
    assert f"**{rejudged.sentence(judged, device)}.**" in (root / "reproduction.md").read_text().split("\n")[4]


def m_commit(runs) -> str:
    commits = {json.loads(p.read_text())["env"]["git_commit"] for p in runs.rglob("r*.json")}
    assert len(commits) == 1
    return commits.pop()
