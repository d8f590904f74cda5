"""Absurd sizes and timeouts are refused before any job, with the reason: the schema's bounds, and the parameter
count and the memory a model, batch or data set would need (compile_study/core/config/sizes.py)."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from compile_study.core.config import config_check, config_schema, grid, sizes
from compile_study.core.dataset import sources, splits

from .conftest import REPO, TINY_MODEL
from .test_bad_input import BASE, edit, errors_of

GiB = 2**30


@pytest.mark.unit
def test_the_parameter_count_is_the_models():
    from compile_study.core.models.model import ModelConfig, TextClassifier

    for model in (TINY_MODEL, BASE["model"], dict(TINY_MODEL, n_layers=3, d_ff=48, max_len=20)):
        cfg = ModelConfig(vocab_size=300, **model)
        assert sizes.n_params(model, 300) == TextClassifier(cfg).n_params()


@pytest.fixture
def host_16_gib(monkeypatch):
    monkeypatch.setattr(sizes, "host_memory", lambda: 16 * GiB)
    monkeypatch.setattr(sizes, "gpu_memory", lambda: None)


@pytest.mark.unit
def test_an_absurd_model_is_refused_with_its_parameter_count_and_memory(host_16_gib):
    (layers,) = [e for e in errors_of(edit("model.n_layers", 10**12)) if e.startswith("model.")]
    assert layers.startswith("model.n_layers: 1,000,000,000,000 gives the model at least 789,760,000,000,034,308 "
                             "parameters: 2.7 EiB of fp32 weights, more than this host's 16.0 GiB of memory")
    assert layers.endswith("use a smaller model.n_layers (default 4)")
    (length,) = [e for e in errors_of(edit("model.max_len", 10**12)) if e.startswith("model.")]
    assert length.startswith("model.max_len: 1,000,000,000,000 gives the model at least 256,000,003,160,580 "
                             "parameters: 931.3 TiB")


@pytest.mark.unit
def test_a_batch_or_length_that_cannot_fit_names_its_need(host_16_gib):
    cfg = edit("grids.cpu.0.batch_size", [8, 500_000])
    (batch,) = errors_of(cfg)
    assert batch.startswith("grids.cpu[0]: batch size 500,000: a training step needs at least 244.2 GiB "
                            "(3,193,348 parameters at 16 bytes each")
    assert batch.endswith("more than this host's 16.0 GiB; use a smaller batch size (default 32)")
    cfg = edit("model.max_len", 2_000_000)
    cfg["data"] |= {"source": "synthetic", "synthetic_rows": 8000}
    found = errors_of(cfg)
    assert any(e.startswith("model.max_len: 2,000,000 makes the token ids of the train split of the synthetic "
                            "corpus (7,201 rows x 2,000,000 x 4 bytes) 53.7 GiB") for e in found), found


@pytest.mark.unit
def test_an_absurd_size_is_reported_under_the_file_that_set_it(host_16_gib):
    mine = {"model": {"max_len": 10**12}}
    problems = config_check.semantic_errors(edit("model.max_len", 10**12), devices=["cpu"])
    text = config_schema.format_errors(problems, [("config.yaml", BASE), ("mine.yaml", mine)])
    assert text.startswith("mine.yaml is invalid:\n  - model.max_len: 1,000,000,000,000 gives the model")


@pytest.mark.parametrize("path, value, message", [
    ("data.hf_timeout_s", 10**12, "data.hf_timeout_s: 1000000000000 is greater than the maximum of 60 (it bounds "
                                  "the hub check (name resolution and one TCP connect to huggingface.co)"),
    ("data.synthetic_rows", 10**12, "data.synthetic_rows: 1000000000000 is greater than the maximum of 10000000 "
                                    "(a bound against typos"),
    ("data.vocab_size", 2**40, "data.vocab_size: 1099511627776 is greater than the maximum of 2147483647 (token ids "
                               "are stored as int32)"),
    ("grids.cpu.0.batch_size", [10**12], "grids.cpu[0].batch_size[0]: 1000000000000 is greater than the maximum"),
    ("grids.cpu.0.timed_steps", 10**12, "grids.cpu[0].timed_steps: 1000000000000 is greater than the maximum of "
                                        "1000000 (a bound against typos"),
    ("parity.cpu.batch_size", 10**12, "parity.cpu.batch_size: 1000000000000 is greater than the maximum"),
])
@pytest.mark.unit
def test_sizes_and_timeouts_have_schema_bounds_with_the_reason(path, value, message):
    assert any(e.startswith(message) for e in errors_of(edit(path, value))), errors_of(edit(path, value))


@pytest.mark.dag
def test_an_absurd_size_fails_the_dry_run_in_one_message_naming_the_file(tmp_path):
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"model": {"max_len": 10**12}, "device": "cpu"}))
    res = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
                          str(tmp_path), "-n", "--configfile", str(REPO / "config.yaml"), str(tmp_path / "mine.yaml")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "mine.yaml is invalid:\n  - model.max_len: 1,000,000,000,000 gives the model at least" in res.stderr


@pytest.mark.unit
def test_a_plugged_model_is_not_sized_by_the_built_in_formula(host_16_gib):
    cfg = edit("model.n_layers", 10**12)  # the built-in model's keys size nothing but the data for a plug
    cfg["model"]["hf_config"] = {"model_type": "bert"}
    cfg["grids"]["cpu"][0]["batch_size"] = [500_000]
    assert sizes.problems(cfg, devices=["cpu"]) == []
    cfg["model"]["max_len"] = 10**12
    ((path, text),) = sizes.problems(cfg, devices=["cpu"])
    assert path == ("model", "max_len") and text.startswith("model.max_len: 1,000,000,000,000 makes the token ids")


# ---------------------------------------------------------------- sizes against the data's rows

def cpu_errors(config: dict) -> list[str]:
    """What the workflow reports for a CPU study (its own grid's semantic checks, the defaults filled in)."""
    from snakemake.utils import validate

    validate(config, str(grid.SCHEMA))
    return [str(e) for e in config_check.semantic_errors(config, devices=["cpu"])]


def tiny_study(**grid_changes) -> dict:
    """config.yaml with .ci/tiny-study.yaml layered over it (400 train rows used), its one sub-grid changed."""
    cfg = grid.merge(copy.deepcopy(BASE), yaml.safe_load((REPO / ".ci" / "tiny-study.yaml").read_text()))
    cfg["grids"]["cpu"][0] |= grid_changes
    return cfg


@pytest.mark.unit
def test_a_batch_larger_than_the_train_split_is_refused_naming_the_cell_the_batch_and_the_rows():
    (error,) = cpu_errors(tiny_study(batch_size=[16, 1024]))
    assert error == ("grids.cpu[0] (tiny): batch_size 1,024 is more than the 400 rows of the train split "
                     "(data.max_train_rows): no batch of static fp32 default, static fp32 eager at batch 1,024 can be "
                     "made; use a batch size of at most 400, or more rows")
    assert cpu_errors(tiny_study(batch_size=[400])) == []
    # bucketed and packed batches would be filler alone: refused alike
    (error,) = cpu_errors(tiny_study(batch_size=[401], shape_regime=["packed"], compile_mode=["eager"]))
    assert "batch_size 401 is more than the 400 rows" in error and "no batch of packed fp32 eager" in error


@pytest.mark.unit
def test_the_rows_of_a_split_known_before_preparation_are_exact():
    cfg = edit("data", dict(BASE["data"], source="synthetic", synthetic_rows=400))
    labels, _ = sources.split_labels(cfg["data"])
    train, _ = splits.split_indices(labels, 0.1, 0)
    assert sizes.train_rows(cfg["data"]) == (len(train), "the train split of the synthetic corpus") and len(train) == 360
    cfg["grids"]["cpu"][0]["batch_size"] = [361]
    (error,) = cpu_errors(cfg)
    assert error.startswith("grids.cpu[0] (cpu-modes): batch_size 361 is more than the 360 rows of the train split of "
                            "the synthetic corpus: no batch of static fp32 default, static fp32 eager at batch 361")
    assert sizes.train_rows(BASE["data"]) == (None, "the train split")  # source auto: the hub may answer


@pytest.mark.unit
def test_the_batch_of_a_parity_check_without_a_cell_of_its_own_is_refused_too():
    cfg = tiny_study(shape_regime=["dynamic"])  # no static module cell: parity runs at parity.cpu.batch_size
    cfg["parity"]["cpu"]["batch_size"] = 512
    (error,) = cpu_errors(cfg)
    assert error == ("parity.cpu.batch_size: 512 is more than the 400 rows of the train split (data.max_train_rows): "
                     "the parity check of default fp32 (no static module cell in the grid to run at) could make no "
                     "batch; use a batch size of at most 400")
    assert cpu_errors(tiny_study(shape_regime=["static", "dynamic"])) == []  # parity runs at the static cell's batch


@pytest.mark.dag
def test_the_dry_run_refuses_a_batch_larger_than_the_train_split(tmp_path):
    """Issue's case: .ci/tiny-study.yaml (400 train rows used) and a grid of one cell at batch 1024."""
    big = tiny_study(batch_size=[1024])["grids"]
    (tmp_path / "big.yaml").write_text(yaml.safe_dump({"grids": {"cpu": big["cpu"]}}))
    res = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
                          str(tmp_path), "-n", "--configfile", str(REPO / "config.yaml"),
                          str(REPO / ".ci" / "tiny-study.yaml"), str(tmp_path / "big.yaml")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert ("big.yaml is invalid:\n  - grids.cpu[0] (tiny): batch_size 1,024 is more than the 400 rows of the train "
            "split (data.max_train_rows)") in res.stderr
    assert "train_run" not in res.stdout
