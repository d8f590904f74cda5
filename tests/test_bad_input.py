"""Bad input fails fast with a message that names the problem: malformed configs and data files."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from compile_study.core import vocab
from compile_study.core.config import config_check, config_schema, grid
from compile_study.core.config.config_problem import Problem
from compile_study.core.dataset.ag_news_csv import KNOWN_SHA256, load_csv, read_ag_news_csv
from compile_study.core.dataset.corpus import DataError

from .conftest import REPO

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
BASE = yaml.safe_load((REPO / "config.yaml").read_text())


def errors_of(config: dict) -> list[str]:
    """What the workflow reports: schema errors, else (defaults filled) the semantic ones."""
    from snakemake.utils import validate

    errors = config_schema.schema_errors(config, SCHEMA)
    if errors:
        return errors
    validate(config, str(SCHEMA))
    return [str(e) for e in config_check.semantic_errors(config)]


def snakemake(study_dir, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(study_dir), *args],
        capture_output=True, text=True, timeout=120, cwd=study_dir,
    )


def snakemake_dry_run(study_dir, *args) -> str:
    """What a user sees from `snakemake -n` in a study directory (asserted to fail)."""
    res = snakemake(study_dir, "-n", *args)
    assert res.returncode != 0
    return res.stdout + res.stderr


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
    ("data.seed", -1, "data.seed: -1 is less than the minimum of 0"),
    ("train.seed", -5, "train.seed: -5 is less than the minimum of 0"),
    ("data.typo_key", 1, "data: unknown key(s) 'typo_key'; allowed:"),
    ("model.n_layers", 0, "model.n_layers: 0 is less than the minimum of 1"),
    ("model.dropout", 1.2, "model.dropout: 1.2 is greater than the maximum of 1"),
    ("model.dropout", {"cpu": 0.0, "cuda": 1.5}, "model.dropout.cuda: 1.5 is greater than the maximum of 1"),
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


@pytest.mark.unit
@pytest.mark.parametrize("path, value, message", BAD_CONFIGS, ids=[f"{p}={v!r}" for p, v, _ in BAD_CONFIGS])
def test_bad_config_is_named_with_its_value_and_what_is_allowed(path, value, message):
    delete = message.endswith("is a required property")
    cfg = edit(path, value, delete=delete)
    if "bucket_sets" in path:
        cfg["grids"]["cpu"][0]["shape_regime"] = ["bucketed"]  # bucket sets are checked where they are used
    errors = errors_of(cfg)
    assert any(e.startswith(message) for e in errors), errors


@pytest.mark.unit
def test_csv_source_needs_an_existing_directory(tmp_path):
    cfg = edit("data", {"source": "csv", "csv_dir": str(tmp_path / "nowhere")})
    assert errors_of(cfg) == [f"data.csv_dir: '{tmp_path / 'nowhere'}' is not a directory (needed by data.source: csv)"]
    cfg = edit("data", {"source": "csv", "csv_dir": str(tmp_path)})
    assert "has no test.csv" in errors_of(cfg)[0]


@pytest.mark.unit
def test_the_shipped_config_is_valid():
    assert errors_of(copy.deepcopy(BASE)) == []


@pytest.mark.unit
@pytest.mark.parametrize("content, problem", [
    ("", "it is empty; a config file maps keys to values (data:, model:, grids:, ...)"),
    ("# a comment alone\n", "it is empty; a config file maps keys to values"),
    ("- data\n- model\n", "it holds a list, not a mapping of keys at the top level (data:, model:, grids:, ...)"),
    ("just words\n", "it holds a str, not a mapping of keys at the top level"),
    ("data: [unclosed\n", "not valid YAML or JSON (while parsing a flow sequence"),
])
def test_a_config_file_that_is_no_mapping_is_named_with_its_path(tmp_path, content, problem):
    path = tmp_path / "mine.yaml"
    path.write_text(content)
    assert grid.config_file_problem(path).startswith(f"config file {path}: {problem}")
    with pytest.raises(SystemExit, match=f"^config file {path}: "):  # estimate, grid, model: python -m compile_study
        grid.load_config([REPO / "config.yaml", path])
    assert grid.config_file_problem(tmp_path / "gone.yaml") == f"config file {tmp_path / 'gone.yaml'}: cannot be read (No such file or directory)"
    assert grid.config_file_problem(REPO / "config.yaml") is None


@pytest.mark.dag
def test_workflow_reports_all_config_errors_at_once_without_a_traceback(tmp_path):
    cfg = edit("device", "tpu")
    cfg["train"]["lr"] = -1
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    out = snakemake_dry_run(tmp_path)
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


@pytest.mark.unit
@pytest.mark.parametrize("content, message", BAD_FILES)
def test_bad_data_file_names_file_line_and_problem(tmp_path, content, message):
    p = write(tmp_path, content)
    with pytest.raises(DataError) as err:
        read_ag_news_csv(p)
    assert str(err.value).startswith(f"{p}: {message}"), str(err.value)


@pytest.mark.unit
def test_a_known_file_with_the_wrong_sha256_is_refused(tmp_path):
    write(tmp_path, '"1","a","b"\n' * 4)
    with pytest.raises(DataError, match=r"test.csv: sha256 .* does not match AG News' test.csv .*verify_sha256: false"):
        load_csv(tmp_path, 0.1, 0)
    assert load_csv(tmp_path, 0.5, 0, verify_sha256=False).description.startswith("AG-News-format CSV (unrecognised")
    assert KNOWN_SHA256["test.csv"].startswith("521465c2")


@pytest.mark.unit
def test_a_directory_without_test_csv_is_refused(tmp_path):
    with pytest.raises(DataError, match="no test.csv"):
        load_csv(tmp_path, 0.1, 0)


@pytest.mark.unit
def test_a_byte_order_mark_is_stripped(tmp_path):
    p = write(tmp_path, b'\xef\xbb\xbf"2","Cup final","Team wins"\n')
    assert read_ag_news_csv(p) == (["Cup final Team wins"], [1])


@pytest.mark.unit
def test_a_header_row_is_named_as_such(tmp_path):
    p = write(tmp_path, '"Class Index","Title","Description"\n"1","a","b"\n')
    with pytest.raises(DataError, match=r"line 1: .* it looks like a header row \('Class Index', 'Title', "
                                         r"'Description'\), and AG News' CSV has none: delete that line"):
        read_ag_news_csv(p)
    p = write(tmp_path, '"2","a","b"\n"1","c","d"\n"x","e","f"\n')  # a bad value further down is no header
    with pytest.raises(DataError) as err:
        read_ag_news_csv(p)
    assert "line 3: class index 'x'" in str(err.value) and "header row" not in str(err.value)


@pytest.mark.unit
def test_train_csv_alone_is_refused_by_a_message_that_says_so(tmp_path):
    write(tmp_path, '"1","a","b"\n', name="train.csv")
    with pytest.raises(DataError) as err:
        load_csv(tmp_path, 0.1, 0)
    assert "train.csv alone is not enough" in str(err.value) and "and/or" not in str(err.value)
    cfg = edit("data", {"source": "csv", "csv_dir": str(tmp_path)})
    (message,) = errors_of(cfg)
    assert "has no test.csv" in message and "test.csv, either beside train.csv or alone" in message


# ---------------------------------------------------------------- grids that expand to no runs

EMPTY_GRIDS = [
    ({"compile_mode": ["eager"], "shape_regime": ["dynamic-true"]},
     "expands to no runs: eager skips shape_regime dynamic-true", "add dynamic or static to shape_regime"),
    ({"compile_mode": ["max-autotune"], "batch_size": [8, 32], "max_autotune_batch_sizes": []},
     "expands to no runs: max-autotune runs only at max_autotune_batch_sizes [], none of batch_size [8, 32]",
     "or null for all"),
    ({"compile_mode": ["eager", "reduce-overhead"], "compile_scope": ["forward"]},
     "expands to no runs: eager runs at compile_scope module, fused-adamw, eager-step-graph only",
     "reduce-overhead does not run "
     "at compile_scope forward: reduce-overhead runs at fused-adamw, graph-break, module, regional, step"),
]


@pytest.mark.unit
@pytest.mark.parametrize("sub_grid, message, fix", EMPTY_GRIDS, ids=["eager-dynamic-true", "autotune-none", "ro-fwd"])
def test_a_sub_grid_without_runs_is_named_with_why_and_the_fix(sub_grid, message, fix):
    cfg = edit("grids.cpu", [{"name": "first"} | sub_grid])
    assert not grid.expand(cfg["grids"]["cpu"])  # what the message claims, by the expansion the workflow uses
    (error,) = errors_of(cfg)
    assert error.startswith(f"grids.cpu[0] (first) {message}") and fix in error, error


@pytest.mark.unit
def test_a_listed_mode_without_runs_is_named_and_an_empty_device_grid_too():
    cfg = edit("grids.cpu", [
        {"name": "modes", "compile_mode": ["eager", "default", "max-autotune"], "max_autotune_batch_sizes": []},
    ])
    assert errors_of(cfg) == ["grids.cpu[0] (modes): compile_mode max-autotune gets no run: it runs only at "
                              "max_autotune_batch_sizes [], none of batch_size [32]: list some of them, "
                              "or null for all"]
    cfg = edit("grids.cpu", [{"name": "a", "compile_mode": ["eager"], "compile_scope": ["step"]},
                             {"name": "b", "compile_mode": ["reduce-overhead"], "compile_scope": ["backward"]}])
    errors = errors_of(cfg)
    assert [e.split(" expands")[0] for e in errors[:2]] == ["grids.cpu[0] (a)", "grids.cpu[1] (b)"]
    assert errors[2] == "grids.cpu: no sub-grid has a run, so the study would have nothing to summarise"


@pytest.mark.unit
@pytest.mark.parametrize("scope", vocab.CUDA_ONLY_SCOPES)
def test_a_cuda_only_scope_in_a_cpu_grid_is_refused_in_one_line_naming_the_key(scope):
    mode = vocab.SCOPE_MODES[scope][0]
    cfg = edit("grids.cpu", [{"name": "graphs", "compile_mode": [mode], "compile_scope": [scope]}])
    assert errors_of(cfg) == [f"grids.cpu[0].compile_scope: {scope} captures the whole step as a CUDA graph, which "
                              "the CPU does not have: list it under grids.cuda"]
    cfg = edit("grids.cuda", [{"name": "graphs", "compile_mode": [mode], "compile_scope": [scope]}])
    assert not [e for e in errors_of(cfg) if "grids.cuda" in e]  # the same sub-grid is a GPU study's


@pytest.mark.dag
def test_the_eager_step_graph_in_a_cpu_grid_fails_the_dry_run(tmp_path):
    cfg = edit("grids.cpu", [{"name": "graphs", "compile_mode": ["eager"], "compile_scope": ["eager-step-graph"]}])
    cfg["device"] = "cpu"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    out = snakemake_dry_run(tmp_path)
    assert "config.yaml is invalid:\n  - grids.cpu[0].compile_scope: eager-step-graph captures the whole step" in out
    assert "Traceback" not in out and "Job stats" not in out


@pytest.mark.dag
def test_a_grid_without_runs_fails_the_dry_run(tmp_path):
    cfg = edit("grids.cpu", [{"name": "eager-only", "compile_mode": ["eager"], "shape_regime": ["dynamic-true"]}])
    cfg["device"] = "cpu"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    out = snakemake_dry_run(tmp_path)
    assert "config.yaml is invalid:\n  - grids.cpu[0] (eager-only) expands to no runs" in out
    assert "Traceback" not in out and "Job stats" not in out


# ---------------------------------------------------------------- seeds, splits, device

@pytest.mark.unit
def test_an_empty_split_names_eval_fraction_and_the_class_counts(tmp_path):
    cfg = edit("data", {"source": "synthetic", "synthetic_rows": 40, "eval_fraction": 0.01})
    (error,) = errors_of(cfg)
    assert error.startswith("data.eval_fraction 0.01 leaves the eval split empty: of the 40 rows of the synthetic "
                            "corpus (World ")
    assert "use data.eval_fraction above 0.0" in error
    write(tmp_path, "".join(f'"{1 + i % 4}","t","d"\n' for i in range(8)))  # 2 rows a class
    cfg = edit("data", {"source": "csv", "csv_dir": str(tmp_path), "eval_fraction": 0.9, "verify_sha256": False})
    (error,) = errors_of(cfg)
    assert error.startswith("data.eval_fraction 0.9 leaves the train split empty: of the 8 rows of ")
    assert "test.csv (World 2, Sports 2, Business 2, Sci/Tech 2), every class gives eval all its rows" in error
    with pytest.raises(DataError, match="data.eval_fraction 0.9 leaves the train split empty"):
        load_csv(tmp_path, 0.9, 0, verify_sha256=False)  # the same check where the data is prepared (source auto)
    cfg["data"]["eval_fraction"] = 0.5
    found = errors_of(cfg)  # the split is fine; its 4 train rows fill no batch of the grids (core/config/sizes.py)
    assert found and all("is more than the 4 rows of the train split of" in e for e in found), found


@pytest.mark.unit
def test_a_malformed_test_csv_fails_at_load_when_it_is_to_be_split(tmp_path):
    write(tmp_path, '"Class Index","Title","Description"\n"1","a","b"\n')
    (error,) = errors_of(edit("data", {"source": "csv", "csv_dir": str(tmp_path), "verify_sha256": False}))
    assert error.startswith(f"data.csv_dir: {tmp_path / 'test.csv'}: line 1: ") and "header row" in error


@pytest.mark.unit
def test_device_cuda_without_a_gpu_names_the_build_and_the_fix(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    (error,) = config_check.device_errors({"device": "cuda"})
    assert error == (f"device: 'cuda', but torch sees no CUDA GPU (torch {torch.__version__}, a CPU-only build); "
                     "use device: auto or cpu")
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    assert "built with CUDA 12.8" in config_check.device_errors({"device": "cuda"})[0]
    assert config_check.device_errors({"device": "auto"}) == []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert config_check.device_errors({"device": "cuda"}) == []


@pytest.mark.dag
def test_device_cuda_on_a_host_without_a_gpu_stops_the_run_before_its_first_job(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    config = edit("device", "cuda")
    config["data"]["source"] = "synthetic"  # no AG News beside tmp_path: on purpose (else the dry run stops on it)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    message = "device: 'cuda', but torch sees no CUDA GPU (torch "
    res = snakemake(tmp_path, "--cores", "1")
    out = res.stdout + res.stderr
    assert res.returncode != 0 and f"config.yaml is invalid:\n  - {message}" in out
    assert "Traceback" not in out and not (tmp_path / "resources").exists()  # not even the data was prepared
    dry = snakemake(tmp_path, "-n")  # planning the GPU study on this host still works, with a warning
    assert dry.returncode == 0 and f"warning: {message}" in dry.stderr and "train_run" in dry.stdout


# ---------------------------------------------------------------- where a bad value came from

SOURCES = [("config.yaml", {"data": {"seed": 0}, "grids": {"cpu": [{"name": "a"}]}}),
           ("configs/overlay.yaml", {"grids": {"cpu": [{"name": "b", "batch_size": [0]}]}, "model": {"n_heads": 3}}),
           ("--config", {"device": "tpu"})]


@pytest.mark.parametrize("keys, source", [
    ((("data", "seed"),), "config.yaml"),
    ((("grids", "cpu", 0, "batch_size", 0),), "configs/overlay.yaml"),  # the overlay's list replaced config.yaml's
    ((("device",),), "--config"),
    ((("model", "d_model"), ("model", "n_heads")), "configs/overlay.yaml"),  # d_model is the schema's default
    ((("data", "seed"), ("device",)), config_schema.MERGED),
    ((("train", "lr"),), config_schema.MERGED),
    ((), config_schema.MERGED),
])
@pytest.mark.unit
def test_an_error_is_named_under_the_source_that_set_its_keys(keys, source):
    assert config_schema.source_of(Problem("x", *keys), SOURCES) == source


@pytest.mark.dag
def test_errors_from_an_overlay_and_from_config_name_those_sources(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(edit("device", "cpu")))
    (tmp_path / "overlay.yaml").write_text("model: {n_layers: 0}\n")
    out = snakemake_dry_run(tmp_path, "--configfile", "overlay.yaml", "--config", "train={lr: -1}", "device=tpu")
    assert "overlay.yaml is invalid:\n  - model.n_layers: 0 is less than the minimum of 1" in out
    assert "--config is invalid (Snakemake reads the values inside a --config mapping as strings" in out
    assert "  - train.lr: '-1' has the wrong type; expected number\n" in out
    assert "  - device: 'tpu' is not allowed" in out
    assert "config.yaml is invalid" not in out.replace("overlay.yaml is invalid", "")
