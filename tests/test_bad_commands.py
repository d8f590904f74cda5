"""Every `python -m compile_study` command answers a bad input in one line naming the file, path or option, with
an exit status that is not 0 and no traceback: a known error (core/errors.py InputError, an OSError, a child's exit
status) is turned into that line in one place, compile_study/__main__.py. In-process, as the command line calls them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compile_study.__main__ import main as command_line
from compile_study.core import record

from .conftest import REPO

CPU_STUDY = REPO / "reference" / "cpu-2core-2026-12-06"  # the smallest stored study: 6 run records
EAGER = "runs/static/fp32/eager/module/bs8/r0.json"
COMPILED = "runs/static/fp32/default/module/bs8"


def study_copy(tmp_path: Path, name: str = "copy") -> Path:
    """The stored CPU study's config, data facts and run records (what compare and spread read)."""
    out = tmp_path / name
    for path in [CPU_STUDY / "config.yaml", CPU_STUDY / "facts.json", *CPU_STUDY.glob("runs/**/r*.json")]:
        dest = out / path.relative_to(CPU_STUDY)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, dest)
    return out


@pytest.fixture
def run(capsys, monkeypatch):
    """python -m compile_study <args> in this process -> (exit status, stderr); a traceback would fail the test."""
    monkeypatch.setattr(sys, "argv", sys.argv[:])

    def call(*args) -> tuple[int, str]:
        try:
            rc = command_line([str(a) for a in args])
        except SystemExit as stop:  # argparse's refusal (its message printed already)
            rc = stop.code
        err = capsys.readouterr().err.strip()
        assert rc != 0 and "Traceback" not in err
        return rc, err
    return call


def last_line(err: str) -> str:
    return err.splitlines()[-1]


@pytest.mark.unit
@pytest.mark.parametrize("damage, problem", [
    (lambda p: p.write_bytes(p.read_bytes()[:300]), "incomplete or corrupt JSON ("),
    (lambda p: p.write_bytes(b""), "empty file (0 bytes)"),
    (lambda p: shutil.copy(p.parents[3] / "eager/module/bs8/r0.json", p),
     "holds the record of another run (eager module bs8 static fp32 r0)"),
], ids=["truncated", "empty", "another-run"])
def test_compare_and_spread_refuse_a_damaged_record_in_one_line(tmp_path, run, damage, problem):
    study = study_copy(tmp_path)
    bad = study / COMPILED / "r1.json"
    damage(bad)
    for args in (["compare", CPU_STUDY, study], ["spread", study, "--configuration", "static", "fp32", "8", "default",
                                                   "module"]):
        rc, err = run(*args)
        assert rc == 2 and err.startswith(f"{args[0]}: {bad}: {problem}") and "\n" not in err, err


@pytest.mark.unit
def test_a_record_under_another_runs_path_is_damaged_and_under_its_own_is_not(tmp_path):
    study = study_copy(tmp_path)
    assert record.path_key(study / EAGER) == record.RunKey("eager", "module", 8, "static", "fp32", 0)
    assert record.problem(study / EAGER) is None and record.path_key(tmp_path / "r0.json") is None
    shutil.copy(study / EAGER, study / COMPILED / "r1.json")  # the copy: eager counted n = 4
    assert record.problem(study / COMPILED / "r1.json").startswith("holds the record of another run (eager ")
    shutil.copy(study / EAGER, tmp_path / "r0.json")  # outside a study's layout: no path to hold it to
    assert record.problem(tmp_path / "r0.json") is None


@pytest.mark.unit
def test_compare_out_that_cannot_be_made_is_named(tmp_path, run):
    (tmp_path / "a-file").write_text("x")
    for out, why in ((tmp_path / "a-file", "File exists"), (tmp_path / "a-file" / "sub", "Not a directory")):
        assert run("compare", CPU_STUDY, CPU_STUDY, "--out", out) == (2, f"compare: {out}: {why}")


@pytest.mark.unit
def test_spread_refuses_a_batch_that_is_no_number_and_a_directory_that_is_no_study(tmp_path, run):
    rc, err = run("spread", CPU_STUDY, "--configuration", "static", "bf16", "abc", "default", "module")
    assert err == "--configuration: BATCH 'abc' is not a batch size (a whole number, e.g. 512)"
    rc, err = run("spread", tmp_path, "--configuration", "static", "fp32", "8", "default", "module")
    assert err == f"{tmp_path}: not a study directory (it has no runs/ and no calls.jsonl)"


@pytest.mark.unit
@pytest.mark.parametrize("option, value", [("--gpus", "-3"), ("--gpus", "0"), ("--cores", "-4"), ("--cores", "0"),
                                           ("--gpus", "two"), ("--cores", str(10**20))])
def test_estimate_refuses_fewer_than_one_gpu_or_core_or_a_typo(run, option, value):
    rc, err = run("estimate", REPO / "config.yaml", "--device", "cuda", option, value)
    assert rc == 2 and last_line(err).endswith(f"error: argument {option}: '{value}' is not a whole number from 1 "
                                               "to 65536")


@pytest.mark.unit
def test_model_refuses_a_vocabulary_below_one_and_a_device_it_does_not_know(run):
    rc, err = run("model", REPO / "config.yaml", "--vocab-size", "0")
    assert rc == 2 and last_line(err).endswith("argument --vocab-size: '0' is not a whole number from 1 to 2147483647")
    rc, err = run("model", REPO / "config.yaml", "--device", "tpu")
    assert rc == 2 and "argument --device: invalid choice: 'tpu'" in last_line(err)


@pytest.mark.unit
def test_estimate_on_an_invalid_overlay_is_the_dry_runs_message(tmp_path, run):
    (tmp_path / "bad.yaml").write_text("model: {n_layers: 0}\n")
    assert run("estimate", REPO / "config.yaml", tmp_path / "bad.yaml", "--device", "cpu") == (
        2, f"{tmp_path / 'bad.yaml'} is invalid:\n  - model.n_layers: 0 is less than the minimum of 1")


@pytest.mark.unit
def test_estimate_refuses_a_method_check_no_module_declares_as_the_dry_run_does(tmp_path, run):
    (tmp_path / "checks.yaml").write_text("checks: {cuda: [timer_check, timer_chek]}\n")
    rc, err = run("estimate", REPO / "config.yaml", tmp_path / "checks.yaml", "--device", "cuda")
    assert rc == 2 and err.startswith(f"{tmp_path / 'checks.yaml'} is invalid:\n  - checks.cuda: no method check "
                                      "'timer_chek' (measure/checks/ declares compile_concurrency, concurrency,")


@pytest.mark.unit
def test_walltime_refuses_a_directory_that_is_no_study_and_a_log_that_is_not_there(tmp_path, run):
    assert run("walltime", tmp_path) == (2, f"{tmp_path}: not a study directory (it has no runs/ and no calls.jsonl)")
    study = study_copy(tmp_path)
    log = tmp_path / "gone.snakemake.log"
    assert run("walltime", study, "--adopt", log) == (2, f"walltime: {log}: No such file or directory")
    (study / "config.yaml").unlink()  # a live study cut short before its config.yaml is written: still a study
    assert command_line(["walltime", str(study)]) == 0


@pytest.mark.unit
def test_compare_models_refuses_two_studies_of_the_built_in_model(tmp_path, run):
    rc, err = run("compare-models", CPU_STUDY, study_copy(tmp_path))
    assert err.startswith(f"{CPU_STUDY}: a study of the built-in model, given as the plugged one: compare-models "
                          "compares a plugged model's study (first) with the built-in model's (second)")
    plugged = REPO / "reference" / "h200-quick-hf-bert-2026-12-02"
    rc, err = run("compare-models", plugged, plugged)
    assert err.startswith(f"{plugged}: a study of a plugged model, given as the builtin one")


@pytest.mark.unit
def test_session_refuses_a_file_for_a_study_and_names_a_missing_or_directory_config_file(tmp_path, run,
                                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("x")
    rc, err = run("session", "a-file", "--", "true")
    assert rc == 2 and last_line(err).endswith("error: a-file: not a directory (the study's, e.g. results/cuda, "
                                               "where calls.jsonl goes)")
    for value in ("nan", "inf", "soon"):
        rc, err = run("session", "--time-limit", value, "results/cpu", "--", "true")
        assert rc == 2 and last_line(err).endswith(f"argument --time-limit: '{value}' is not a finite number of seconds")
    (tmp_path / "adir").mkdir()
    for given, why in (("gone.yaml", "No such file or directory"), ("adir", "Is a directory")):
        rc, err = run("session", "results/cpu", "--", "snakemake", "--configfile", given, "-n")
        assert (rc, err) == (2, f"config file {given}: cannot be read ({why})")
    assert not (tmp_path / "results").exists()  # nothing ran, no call logged


@pytest.mark.unit
def test_a_known_error_is_one_line_and_a_fault_of_the_code_keeps_its_traceback(monkeypatch, run):
    from compile_study.report.docs import rebuild

    def fails(*args, **kwargs):
        raise subprocess.CalledProcessError(1, [sys.executable, "-m", "snakemake", "-s", "Snakefile"])

    monkeypatch.setattr(rebuild.subprocess, "run", fails)
    assert run("rebuild", CPU_STUDY) == (2, f"rebuild: {sys.executable} -m snakemake ... ended with exit status 1 "
                                            "(its message is above)")
    monkeypatch.setattr(rebuild.subprocess, "run", lambda *a, **k: json.loads("{"))  # a bug is no bad input
    with pytest.raises(json.JSONDecodeError):
        command_line(["rebuild", str(CPU_STUDY)])


@pytest.mark.dag
def test_rebuild_of_a_damaged_stored_study_ends_in_its_message_and_one_line(tmp_path):
    study = study_copy(tmp_path)
    (study / COMPILED / "r1.json").write_bytes(b"")
    res = subprocess.run([sys.executable, "-m", "compile_study", "rebuild", str(study)], capture_output=True,
                         text=True, timeout=300, cwd=REPO)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "1 damaged record(s) in this stored study" in res.stderr and f"{COMPILED}/r1.json: empty file" in res.stderr
    assert res.stderr.strip().splitlines()[-1].endswith("ended with exit status 1 (its message is above)")


@pytest.mark.dag
def test_plain_snakemake_on_a_missing_or_directory_config_file_says_what_the_readme_says(tmp_path):
    """Snakemake's own loader reads --configfile before the Snakefile: the README quotes its last line."""
    from .test_bad_input import snakemake

    (tmp_path / "adir").mkdir()
    readme = " ".join((REPO / "README.md").read_text().split())
    for given, said in (("gone.yaml", "FileNotFoundError: [Errno 2] No such file or directory: 'gone.yaml'"),
                        ("adir", "IsADirectoryError: [Errno 21] Is a directory: 'adir'")):
        res = snakemake(tmp_path, "-n", "--configfile", given)
        assert res.returncode != 0 and said in (res.stdout + res.stderr).splitlines()  # the traceback's last line
        assert said.split(": '")[0] in readme
