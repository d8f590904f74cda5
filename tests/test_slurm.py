"""The tiny study through a real SLURM: every job an sbatch job, the paper's numbers the records', a cancelled job resumed.

Needs a running SLURM with a partition `debug` (as root: `bash tests/cluster/start-slurm.sh`; CI: `.ci/slurm.sh`):
    python -m pytest tests/test_slurm.py -v
One study is run for all three tests: started, one running job cancelled with `scancel`, then rerun with the same
command; it takes a few minutes on 2 cores.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from .conftest import REPO
from .test_workflow import check_tiny_paper, write_tiny_config

# --- what the test relies on in the workflow and in the SLURM executor, in one place ---
PROFILE = REPO / "profiles" / "slurm-ci"
JOB_RULES = {"prepare_data", "check_model", "cold_compile", "train_run", "parity", "measure_peak", "mlp_claim", "summarize", "figures", "paper",
             "study_readme", "portable_start"} | (
    {"paper_pdf"} if shutil.which("latexmk") else set())
LOCAL_RULES = {"all", "study_facts", "study_config"}  # the workflow's localrules: copies, never queued
# The job cancelled mid-study: the cold compile of the tiny grid's compiled configuration (a wide window), named by
# the comment the executor gives its sbatch job (rule_<rule>_wildcards_<values>), and the record it writes.
CANCEL_COMMENT = "rule_cold_compile_wildcards_static_fp32_default_module_16_0"
CANCEL_RECORD = "results/cpu/compiles/static/fp32/default/module/bs16/c0.json"
RECORD_DIRS = ("results", "resources/data")  # what finished jobs wrote: a resumed study leaves it byte-identical
SUBMITTED = re.compile(r"Job \d+ has been submitted with SLURM jobid (\d+) \(log: (\S+)\)\.")
SLURM_LOG_RULE = re.compile(r"/slurm_logs/rule_(\w+)/")  # .snakemake/slurm_logs/rule_<rule>/[<wildcards>/]<id>.log


def slurm_state() -> str | None:
    """Why SLURM cannot take the test's jobs here, or None when partition debug has a node ready."""
    if shutil.which("sinfo") is None:
        return "SLURM is not installed (no sinfo): apt-get install slurm-wlm munge, or run .ci/slurm.sh"
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        return "snakemake-executor-plugin-slurm is not installed (pip install -r requirements.txt)"
    start = "as root, bash tests/cluster/start-slurm.sh"
    if not Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).is_file():
        return f"SLURM is not configured (no slurm.conf): {start}"
    try:
        res = subprocess.run(["sinfo", "-h", "-p", "debug", "-o", "%T"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return f"SLURM is not up (sinfo did not answer in 20 s): {start}"
    states = res.stdout.split()
    if res.returncode != 0 or not any(s.startswith(("idle", "mix", "alloc")) for s in states):
        why = res.stderr.strip() or f"node states {states or 'none'} in partition debug"
        return f"SLURM is not up ({why}): {start}"
    return None


pytestmark = [pytest.mark.slurm, pytest.mark.xdist_group("slurm")]  # its fixture runs the study once for every test here


@pytest.fixture(scope="module", autouse=True)
def slurm_up() -> None:
    """Asked only where a test of this file runs (not at collection: asking SLURM takes seconds, and the other
    tiers' runs collect this file too)."""
    why = slurm_state()
    if why is not None:
        pytest.skip(why)


def snakemake_cmd(study: Path) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(study),
            "--workflow-profile", str(PROFILE)]


def squeue() -> dict[str, tuple[str, str]]:
    """SLURM job id -> (state, comment) of the jobs SLURM holds now."""
    out = subprocess.run(["squeue", "-h", "-o", "%i|%T|%k"], capture_output=True, text=True, check=True).stdout
    return {i: (state, comment) for i, state, comment in (line.split("|", 2) for line in out.splitlines())}


def digests(study: Path) -> dict[str, str]:
    return {str(p.relative_to(study)): hashlib.sha256(p.read_bytes()).hexdigest()
            for d in RECORD_DIRS for p in sorted((study / d).rglob("*")) if p.is_file()}


def cancel_when_running(study: Path, run: subprocess.Popen, timeout_s: float = 900) -> tuple[str, dict]:
    """Wait until the chosen job runs and some job has finished; snapshot the outputs, then scancel it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert run.poll() is None, "the study ended before the job to cancel ran"
        running = [i for i, (state, comment) in squeue().items() if state == "RUNNING" and comment == CANCEL_COMMENT]
        before = digests(study)
        if running and any(p.startswith("results/") for p in before) and CANCEL_RECORD not in before:
            subprocess.run(["scancel", running[0]], check=True)
            return running[0], before
        time.sleep(1)
    raise AssertionError(f"{CANCEL_COMMENT} never ran within {timeout_s} s")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The tiny study through SLURM: one job cancelled mid-run, then the same command again."""
    study = tmp_path_factory.mktemp("slurm-study")
    real = write_tiny_config(study)
    cfg = yaml.safe_load((study / "config.yaml").read_text())
    node_cpus = subprocess.run(["sinfo", "-h", "-p", "debug", "-o", "%c"], capture_output=True, text=True).stdout
    cfg["cluster"] = {"timed_cpus": int(node_cpus.split()[0].rstrip("+"))}  # a timed job takes the node's cores
    (study / "config.yaml").write_text(yaml.safe_dump(cfg))

    t0 = time.monotonic()
    with open(study / "first.log", "w") as log:
        first = subprocess.Popen(snakemake_cmd(study), cwd=study, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            cancelled, before = cancel_when_running(study, first)
            t_cancel = time.monotonic() - t0
            first.wait(timeout=900)
        finally:
            if first.poll() is None:
                first.kill()
    t1 = time.monotonic()
    after_first = digests(study)
    second = subprocess.run(snakemake_cmd(study), cwd=study, capture_output=True, text=True, timeout=900)
    (study / "second.log").write_text(second.stdout + second.stderr)
    return dict(dir=study, real=real, cancelled=cancelled, before=before, after_first=after_first,
                first_rc=first.returncode, second_rc=second.returncode, t_cancel=t_cancel,
                t_first=t1 - t0, t_second=time.monotonic() - t1,
                first_log=(study / "first.log").read_text(), second_log=(study / "second.log").read_text())


def submissions(log: str) -> list[tuple[str, str]]:
    """(SLURM job id, rule) of every job Snakemake submitted, from its log."""
    return [(jobid, SLURM_LOG_RULE.search(path)[1]) for jobid, path in SUBMITTED.findall(log)]


def test_every_job_went_through_slurm(study, capsys):
    assert study["second_rc"] == 0, study["second_log"][-3000:]
    jobs = submissions(study["first_log"]) + submissions(study["second_log"])
    assert {rule for _, rule in jobs} == JOB_RULES
    ids = [int(i) for i, _ in jobs]
    assert len(set(ids)) == len(ids)  # one sbatch job per Snakemake job
    # every job's SLURM log is there under its SLURM job id, and no job but `all` ran on the submitting host
    for jobid, rule in jobs:
        assert list((study["dir"] / ".snakemake/slurm_logs").glob(f"rule_{rule}/**/{jobid}.log")), (jobid, rule)
    local = re.findall(r"^localrule (\w+):", study["first_log"] + study["second_log"], re.M)
    assert set(local) <= LOCAL_RULES
    with capsys.disabled():
        print(f"\n[slurm] {len(jobs)} sbatch jobs, SLURM job ids {min(ids)}-{max(ids)}: "
              + ", ".join(f"{rule}={i}" for i, rule in jobs))


def test_paper_numbers_equal_the_records(study):
    assert study["second_rc"] == 0, study["second_log"][-3000:]
    check_tiny_paper(study["dir"], study["real"])


def test_a_cancelled_job_reruns_and_finished_records_stay(study, capsys):
    assert study["first_rc"] != 0  # Snakemake saw the cancelled job fail ...
    assert f"SLURM-job '{study['cancelled']}' failed" in study["first_log"]
    assert CANCEL_RECORD not in study["after_first"]  # ... and left no record of it
    assert study["second_rc"] == 0, study["second_log"][-3000:]
    rerun = [rule for _, rule in submissions(study["second_log"])]
    assert "cold_compile" in rerun and "prepare_data" not in rerun  # only what was not done runs again
    final = digests(study["dir"])
    assert CANCEL_RECORD in final
    unchanged = {p for p, d in study["before"].items() if final.get(p) == d}
    assert unchanged == set(study["before"]), sorted(set(study["before"]) - unchanged)
    with capsys.disabled():
        print(f"\n[slurm] scancel {study['cancelled']} ({CANCEL_COMMENT}) at {study['t_cancel']:.0f} s; "
              f"first run exit {study['first_rc']} after {study['t_first']:.0f} s; rerun exit {study['second_rc']} "
              f"after {study['t_second']:.0f} s, jobs {rerun}; {len(unchanged)} files finished before the cancel "
              "byte-identical")
