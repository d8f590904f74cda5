"""Bad input fails fast with a message that names the problem: malformed configs and data files."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from compile_study import config_check
from compile_study.data import KNOWN_SHA256, DataError, load_csv, read_ag_news_csv

from .conftest import REPO

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
BASE = yaml.safe_load((REPO / "config.yaml").read_text())


def errors_of(config: dict) -> list[str]:
    """What the workflow reports: schema errors, else (defaults filled) the semantic ones."""
    from snakemake.utils import validate

    errors = config_check.schema_errors(config, SCHEMA)
    if errors:
        return errors
    validate(config, str(SCHEMA))
    return config_check.semantic_errors(config)


def edit(path: str, value, delete: bool = False) -> dict:
    cfg = copy.deepcopy(BASE)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node = cfg
    for p in parents:
        node = node[p]
    if delete:
        del node[last]
    else:
        node[last] = value
    return cfg


BAD_CONFIGS = [
    ("data.source", "hff", "data.source: 'hff' is not allowed; allowed: auto, hf, csv, synthetic"),
    ("data.eval_fraction", 1.5, "data.eval_fraction: 1.5 is greater than or equal to the maximum of 1"),
    ("data.eval_fraction", 0, "data.eval_fraction: 0 is less than or equal to the minimum of 0"),
    ("data.vocab_size", "big", "data.vocab_size: 'big' has the wrong type; expected integer"),
    ("data.hf_timeout_s", -1, "data.hf_timeout_s: -1 is less than or equal to the minimum of 0"),
    ("data.typo_key", 1, "data: unknown key(s) 'typo_key'; allowed:"),
    ("model.n_layers", 0, "model.n_layers: 0 is less than the minimum of 1"),
    ("model.dropout", 1.2, "model.dropout: 1.2 is greater than the maximum of 1"),
    ("model.d_model", 250, "model.d_model: 250 is not divisible by model.n_heads (4)"),
    ("model.max_len", 64.5, "model.max_len: 64.5 has the wrong type; expected integer"),
    ("train.lr", 0, "train.lr: 0 is less than or equal to the minimum of 0"),
    ("device", "tpu", "device: 'tpu' is not allowed; allowed: auto, cpu, cuda"),
    ("grids.cpu", [], "grids.cpu: [] should be non-empty"),
    ("grids.cpu.0.batch_size", [0, 8], "grids.cpu[0].batch_size[0]: 0 is less than the minimum of 1"),
    ("grids.cpu.0.batch_size", [], "grids.cpu[0].batch_size: [] should be non-empty"),
    ("grids.cpu.0.repeats", 0, "grids.cpu[0].repeats: 0 is less than the minimum of 1"),
    ("grids.cpu.0.compile_mode", ["eager", "fast"], "grids.cpu[0].compile_mode[1]: 'fast' is not allowed; allowed: eager, default, reduce-overhead, max-autotune"),
    ("grids.cpu.0.precision", ["fp8"], "grids.cpu[0].precision[0]: 'fp8' is not allowed; allowed: fp32, tf32, bf16"),
    ("grids.cpu.0.shape_regime", ["ragged"], "grids.cpu[0].shape_regime[0]: 'ragged' is not allowed"),
    ("grids.cpu.0.timed_steps", 1, "grids.cpu[0].timed_steps: 1 is less than the minimum of 2"),
    ("grids.cpu.0.bucket_sets", [[64, 32, 128]], "grids.cpu[0].bucket_sets[0]: [64, 32, 128] must be strictly increasing"),
    ("grids.cpu.0.bucket_sets", [[32, 64]], "grids.cpu[0].bucket_sets[0]: [32, 64] must end at model.max_len (128)"),
    ("grids.cpu.0.bucket_sets", [[32, 64, 256]], "grids.cpu[0].bucket_sets[0]: [32, 64, 256] must end at model.max_len (128)"),
    ("grids.cpu.0.max_autotune_batch_sizes", [4096], "grids.cpu[0].max_autotune_batch_sizes: [4096] are not in batch_size"),
    ("grids.cpu.0.name", None, "grids.cpu[0].name: None has the wrong type; expected string"),
    ("grids.cpu.0.name", None, "grids.cpu[0]: 'name' is a required property"),
    ("grids.gpu", [], "grids: unknown key(s) 'gpu'; allowed: cpu, cuda"),
    ("parity.cpu.batch_size", -8, "parity.cpu.batch_size: -8 is less than the minimum of 1"),
]


@pytest.mark.parametrize("path, value, message", BAD_CONFIGS, ids=[f"{p}={v!r}" for p, v, _ in BAD_CONFIGS])
def test_bad_config_is_named_with_its_value_and_what_is_allowed(path, value, message):
    delete = message.endswith("is a required property")
    cfg = edit(path, value, delete=delete)
    if "bucket_sets" in path:
        cfg["grids"]["cpu"][0]["shape_regime"] = ["bucketed"]  # bucket sets are checked where they are used
    errors = errors_of(cfg)
    assert any(e.startswith(message) for e in errors), errors


def test_csv_source_needs_an_existing_directory(tmp_path):
    cfg = edit("data", {"source": "csv", "csv_dir": str(tmp_path / "nowhere")})
    assert errors_of(cfg) == [f"data.csv_dir: '{tmp_path / 'nowhere'}' is not a directory (needed by data.source: csv)"]
    cfg = edit("data", {"source": "csv", "csv_dir": str(tmp_path)})
    assert "has no test.csv" in errors_of(cfg)[0]


def test_the_shipped_config_is_valid():
    assert errors_of(copy.deepcopy(BASE)) == []


def test_workflow_reports_all_config_errors_at_once_without_a_traceback(tmp_path):
    cfg = edit("device", "tpu")
    cfg["train"]["lr"] = -1
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path), "-n"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert "config.yaml is invalid:\n  - device: 'tpu' is not allowed; allowed: auto, cpu, cuda" in out
    assert "train.lr: -1 is less than or equal to the minimum of 0" in out
    assert "Traceback" not in out


def write(tmp_path, content: str | bytes, name: str = "test.csv"):
    p = tmp_path / name
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return p


BAD_FILES = [
    ('"1","only two"\n', "line 1: expected 3 fields (class index, title, description), got 2"),
    ('"1","a","b"\n"2","c","d","e"\n', "line 2: expected 3 fields (class index, title, description), got 4"),
    ('"1","a","b"\n"5","c","d"\n', "line 2: class index '5' is not one of 1, 2, 3, 4"),
    ('"0","a","b"\n', "line 1: class index '0' is not one of 1, 2, 3, 4"),
    ('"World","a","b"\n', "line 1: class index 'World' is not one of 1, 2, 3, 4"),
    (b'"1","a","b"\n"2","caf\xe9","x"\n', "line 2: not valid UTF-8 (byte 0xe9 at offset 20)"),
    ("", "file is empty"),
    ('"1","a","b"\n"2","truncated in the mid', "line 2: malformed CSV (unexpected end of data); is the file truncated?"),
    ('"1","a"b","c"\n', "line 1: malformed CSV"),
]


@pytest.mark.parametrize("content, message", BAD_FILES)
def test_bad_data_file_names_file_line_and_problem(tmp_path, content, message):
    p = write(tmp_path, content)
    with pytest.raises(DataError) as err:
        read_ag_news_csv(p)
    assert str(err.value).startswith(f"{p}: {message}"), str(err.value)


def test_a_known_file_with_the_wrong_sha256_is_refused(tmp_path):
    write(tmp_path, '"1","a","b"\n')
    with pytest.raises(DataError, match=r"test.csv: sha256 .* does not match AG News' test.csv .*verify_sha256: false"):
        load_csv(tmp_path, 0.1, 0)
    assert load_csv(tmp_path, 0.5, 0, verify_sha256=False).description.startswith("AG-News-format CSV (unrecognised")
    assert KNOWN_SHA256["test.csv"].startswith("521465c2")


def test_a_directory_without_test_csv_is_refused(tmp_path):
    with pytest.raises(DataError, match="no test.csv"):
        load_csv(tmp_path, 0.1, 0)
