"""Quietly wrong input is named at the dry run: a dangling link, a device or a directory for a CSV, a csv_dir the
user named that holds no data (an error), the default one missing with source auto (a warning), a field too long
for the CSV reader; the facts say the rows available and used."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from compile_study.core.config import config_check, data_check
from compile_study.core.dataset import ag_news_csv, data, sources
from compile_study.core.dataset.corpus import DataError

from .conftest import REPO, TINY_MODEL, data_cfg
from .test_bad_input import BASE, edit, errors_of


def ag_rows(n: int = 40) -> str:
    return "".join(f'"{1 + i % 4}","title {i}","words {i}"\n' for i in range(n))


def csv_cfg(csv_dir: Path, source: str = "csv") -> dict:
    return edit("data", dict(BASE["data"], source=source, csv_dir=str(csv_dir), verify_sha256=False))


@pytest.mark.unit
def test_a_dangling_train_csv_is_named_not_passed_over_for_a_split_of_test_csv(tmp_path):
    (tmp_path / "test.csv").write_text(ag_rows())
    (tmp_path / "train.csv").symlink_to(tmp_path / "moved-away.csv")
    with pytest.raises(DataError, match=f"^{tmp_path}/train.csv is a symbolic link to '{tmp_path}/moved-away.csv', "
                                        "which does not exist"):
        ag_news_csv.load_csv(tmp_path, 0.1, 0, verify_sha256=False)
    (error,) = errors_of(csv_cfg(tmp_path))  # at the dry run
    assert error.startswith(f"data.csv_dir: {tmp_path}/train.csv is a symbolic link")


@pytest.mark.parametrize("make, kind", [
    (lambda p: p.symlink_to("/dev/null"), "a character device"),
    (lambda p: p.mkdir(), "a directory"),
    (lambda p: os.mkfifo(p), "a named pipe"),
])
@pytest.mark.unit
def test_a_test_csv_that_is_not_a_regular_file_says_what_it_is(tmp_path, make, kind):
    make(tmp_path / "test.csv")
    (error,) = errors_of(csv_cfg(tmp_path))
    assert error.startswith(f"data.csv_dir: {tmp_path}/test.csv is {kind}, not a regular file")
    with pytest.raises(DataError, match=f"test.csv is {kind}"):
        sources.load_corpus(dict(data_cfg(source="auto", csv_dir=str(tmp_path)), hf_timeout_s=0.1), tmp_path / "hf")


@pytest.mark.unit
def test_the_default_csv_dir_missing_with_source_auto_is_a_warning_naming_the_fallback(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default, ../shared/data/ag_news, is not beside this directory
    default = data_check.default_csv_dir()
    (warning,) = config_check.data_warnings(csv_cfg(default, source="auto")["data"])
    assert warning.startswith(f"data.csv_dir: {default!r} is not a directory; with data.source auto the study "
                              "falls back to the SYNTHETIC stand-in")
    assert errors_of(csv_cfg(default, source="auto")) == []


@pytest.mark.unit
@pytest.mark.parametrize("make, what", [
    (lambda d: d / "nowhere", "does not exist"),
    (lambda d: (d / "a-file").write_text("") or d / "a-file", "is not a directory"),
    (lambda d: d, "has no test.csv"),
])
def test_a_csv_dir_the_user_named_without_data_is_an_error_not_a_synthetic_fallback(tmp_path, make, what):
    named = make(tmp_path)
    (error,) = errors_of(csv_cfg(named, source="auto"))
    assert error.startswith(f"data.csv_dir: {str(named)!r} {what}; a directory named in data.csv_dir must hold the "
                            "data (AG News CSV layout: test.csv, either beside train.csv or alone")
    assert error.endswith("else source auto would fall back to the SYNTHETIC stand-in: fix the path, leave "
                          "data.csv_dir at its default (../shared/data/ag_news) to let source auto look there, or set "
                          "data.source: synthetic to run on the stand-in on purpose")
    assert config_check.data_warnings(csv_cfg(named, source="auto")["data"]) == []  # not also a warning
    (tmp_path / "test.csv").write_text(ag_rows())
    assert errors_of(csv_cfg(tmp_path, source="auto")) == []


@pytest.mark.dag
def test_a_named_csv_dir_that_does_not_exist_fails_the_dry_run_under_the_file_that_set_it(tmp_path):
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["data"]["csv_dir"] = str(tmp_path / "nowhere")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    res = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
                          str(tmp_path), "-n", "--config", "device=cpu"], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert f"config.yaml is invalid:\n  - data.csv_dir: '{tmp_path / 'nowhere'}' does not exist; a directory named" in res.stderr
    assert "prepare_data" not in res.stdout  # no job planned


@pytest.mark.unit
def test_a_huge_field_is_named_as_such_not_as_truncation(tmp_path):
    path = tmp_path / "test.csv"
    path.write_text(ag_rows(3) + '"2","title","' + "x" * 1_000_000 + '"\n')
    with pytest.raises(DataError) as err:
        ag_news_csv.read_ag_news_csv(path)
    assert str(err.value).startswith(f"{path}: line 4: a field longer than 131,072 characters, the CSV reader's limit")
    assert "truncated" not in str(err.value)


# ---------------------------------------------------------------- the facts say what was used


@pytest.mark.unit
def test_facts_give_the_rows_available_and_the_rows_used(tmp_path):
    facts = data.prepare(data_cfg(max_train_rows=100), TINY_MODEL["max_len"], tmp_path, tmp_path / "hf")
    assert facts["corpus_rows"] == 400
    assert (facts["splits"]["train"]["rows"], facts["splits"]["train"]["rows_available"]) == (100, 360)
    assert (facts["splits"]["eval"]["rows"], facts["splits"]["eval"]["rows_available"]) == (40, 40)
