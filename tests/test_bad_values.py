"""Values no JSON schema bound refuses, refused by one rule for every number of the config (NaN, infinity,
integers past 64 bits: core/config/config_schema.py number_errors), a key given twice in a config file, and a hub
dataset that is not AG News."""

from __future__ import annotations

import copy
import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from compile_study.core.config import config_schema, grid
from compile_study.core.dataset import sources
from compile_study.core.dataset.corpus import DataError

from .test_bad_input import BASE, SCHEMA, errors_of, snakemake_dry_run


def numeric_keys(schema: dict) -> list[tuple]:
    """Every key path of the schema whose value is a number or an integer (a list's first item at index 0, so a
    sub-grid's at grids.<device>[0]; a value given per device under its device too)."""
    root = schema

    def walk(node: dict, path: tuple):
        if "$ref" in node:
            node = root["definitions"][node["$ref"].rsplit("/", 1)[1]]
        for branch in node.get("oneOf", []):
            yield from walk(branch, path)
        types = node.get("type", [])
        types = [types] if isinstance(types, str) else types
        if {"number", "integer"} & set(types):
            yield path
        for key, child in node.get("properties", {}).items():
            yield from walk(child, path + (key,))
        if "items" in node:
            yield from walk(node["items"], path + (0,))

    return list(dict.fromkeys(walk(schema, ())))


NUMERIC_KEYS = numeric_keys(yaml.safe_load(SCHEMA.read_text()))


def put(config: dict, path: tuple, value) -> dict:
    """config with `value` at `path`, making the mappings and lists on the way."""
    cfg = copy.deepcopy(config)
    node = cfg
    for part, after in zip(path, path[1:]):
        empty = [None] if isinstance(after, int) else {}
        if isinstance(part, int):
            node[part] = node[part] if isinstance(node[part], (dict, list)) else empty
        elif not isinstance(node.get(part), (dict, list)) or isinstance(after, int) != isinstance(node[part], list):
            node[part] = empty
        node = node[part]
    node[path[-1]] = value
    return cfg


def key_text(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


BAD_NUMBERS = [(math.nan, "nan is not a finite number"), (math.inf, "inf is not a finite number"),
               (-math.inf, "-inf is not a finite number"),
               (2**64, "18446744073709551616 is beyond the 64-bit integers torch and numpy take"),
               (-(2**63) - 1, "-9223372036854775809 is beyond the 64-bit integers")]


@pytest.mark.unit
def test_the_schema_has_the_numeric_keys_the_issue_named():
    keys = set(map(key_text, NUMERIC_KEYS))
    assert {"train.lr", "train.seed", "data.eval_fraction", "data.hf_timeout_s", "model.dropout", "model.dropout.cuda",
            "grids.cpu[0].batch_size[0]", "grids.cuda[0].repeats", "parity.cpu.batch_size"} <= keys
    assert len(keys) == len(NUMERIC_KEYS) > 60


@pytest.mark.unit
@pytest.mark.parametrize("value, message", BAD_NUMBERS, ids=["nan", "inf", "-inf", "2**64", "-2**63-1"])
def test_a_number_that_is_not_finite_or_past_64_bits_is_refused_at_every_numeric_key(value, message):
    for path in NUMERIC_KEYS:
        errors = errors_of(put(BASE, path, value))
        assert any(e.startswith(f"{key_text(path)}: {message}") for e in errors), errors
        assert not any(e.startswith(f"{key_text(path)}: ") and "maximum" in e for e in errors)  # said once


@pytest.mark.unit
def test_the_largest_64_bit_seed_and_a_tiny_rate_pass_the_number_rule():
    cfg = put(put(BASE, ("train", "seed"), 2**63 - 1), ("train", "lr"), 1e-300)
    assert config_schema.number_errors(cfg) == [] and errors_of(cfg) == []


@pytest.mark.property
@settings(max_examples=200, deadline=None, database=None)
@given(path=st.sampled_from(NUMERIC_KEYS),
       value=st.one_of(st.sampled_from([math.nan, math.inf, -math.inf]), st.integers(min_value=2**63),
                       st.integers(max_value=-(2**63) - 1)))
def test_every_numeric_key_refuses_every_value_past_torch_and_numpy(path, value):
    overlay = put({}, path, value)
    problems = config_schema.schema_errors(grid.merge(copy.deepcopy(BASE), copy.deepcopy(overlay)), SCHEMA)
    named = [p for p in problems if p.startswith(f"{key_text(path)}: ")]
    assert named and ("not a finite number" in named[0] or "beyond the 64-bit integers" in named[0]), problems
    text = config_schema.format_errors(problems, [("config.yaml", BASE), ("mine.yaml", overlay)])
    assert text.startswith("mine.yaml is invalid:\n  - ")  # under the file that set it


# ---------------------------------------------------------------- a key given twice

@pytest.mark.unit
def test_a_key_given_twice_is_named_with_its_file_and_lines(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("train:\n  lr: 0.001\n  seed: 1\n  lr: 0.1\n")
    message = f"config file {path}: key 'lr' is given twice (lines 2 and 4); YAML would keep only the last value"
    assert grid.config_file_problem(path).startswith(message)
    with pytest.raises(SystemExit, match="^config file .*dup.yaml: key 'lr' is given twice"):  # estimate, grid, model
        grid.load_config([SCHEMA.parents[2] / "config.yaml", path])
    path.write_text("{data: {seed: 1, seed: 2}}\n")  # on one line too
    assert "key 'seed' is given twice (lines 1 and 1)" in grid.config_file_problem(path)
    path.write_text("train: {lr: 0.001}\nmodel: {lr: 0.1}\n")  # one name in two mappings is no repeat
    assert grid.config_file_problem(path) is None


@pytest.mark.unit
def test_estimate_on_an_invalid_overlay_says_what_the_dry_run_says(tmp_path):
    (tmp_path / "n.yaml").write_text("train: {lr: .nan}\nmodel: {n_layers: 0}\n")
    with pytest.raises(SystemExit) as stop:
        grid.load_config([SCHEMA.parents[2] / "config.yaml", tmp_path / "n.yaml"])
    assert str(stop.value.code) == (f"{tmp_path / 'n.yaml'} is invalid:\n  - train.lr: nan is not a finite number; "
                                    "give a finite one\n  - model.n_layers: 0 is less than the minimum of 1")


@pytest.mark.dag
def test_the_dry_run_refuses_a_nan_and_a_key_given_twice_naming_the_file(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(put(BASE, ("device",), "cpu")))
    (tmp_path / "n.yaml").write_text("train: {lr: .nan}\ndata: {eval_fraction: .inf}\n")
    out = snakemake_dry_run(tmp_path, "--configfile", "n.yaml")
    assert "n.yaml is invalid:\n  - " in out and "  - data.eval_fraction: inf is not a finite number" in out
    assert "  - train.lr: nan is not a finite number" in out and "Traceback" not in out
    (tmp_path / "n.yaml").write_text("train:\n  seed: 1\n  seed: 18446744073709551616\n")
    out = snakemake_dry_run(tmp_path, "--configfile", "n.yaml")
    assert "config file" in out and "n.yaml: key 'seed' is given twice (lines 2 and 3)" in out
    assert "Traceback" not in out


# ---------------------------------------------------------------- a hub dataset that is not AG News

def hub(labels: dict[str, list[int]], names: list[str] | None):
    datasets = pytest.importorskip("datasets")
    feature = datasets.ClassLabel(names=names) if names else datasets.Value("int64")
    features = datasets.Features({"text": datasets.Value("string"), "label": feature})
    return datasets.DatasetDict({split: datasets.Dataset.from_dict({"text": ["a news text"] * len(ys), "label": ys},
                                                                   features=features)
                                 for split, ys in labels.items()})


AG_NEWS = ["World", "Sports", "Business", "Sci/Tech"]


@pytest.mark.unit
@pytest.mark.parametrize("labels, names, message", [
    ({"train": [0, 1], "test": [1]}, ["neg", "pos"],
     "data.hf_name 'x/imdb': its 2 classes are neg, pos, not AG News' 4 classes (World, Sports, Business, Sci/Tech)"),
    ({"train": [0, 5], "test": [3]}, None, "data.hf_name 'x/imdb': its labels are [0, 3, 5], not AG News' 4 classes"),
    ({"train": [0, 1], "test": [1]}, None, "data.hf_name 'x/imdb': its labels are [0, 1], not AG News' 4 classes"),
    ({"train": [0, 1]}, AG_NEWS, "data.hf_name 'x/imdb': no test split (it has train)"),
    ({"train": [0, 1], "test": [2]}, AG_NEWS + ["Health"], "data.hf_name 'x/imdb': its 5 classes are World, Sports, Business, Sci/Tech, Health"),
], ids=["imdb", "unnamed-6", "unnamed-2", "no-test", "five"])
def test_a_hub_dataset_that_is_not_ag_news_is_refused_before_any_run(monkeypatch, tmp_path, labels, names, message):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setattr(datasets, "load_dataset", lambda name, cache_dir: hub(labels, names))
    with pytest.raises(DataError) as err:
        sources.load_hf("x/imdb", tmp_path)
    assert str(err.value).startswith(message), str(err.value)
    monkeypatch.setattr(sources, "hub_reachable", lambda timeout_s: True)  # source auto does not fall over to CSV
    cfg = {"source": "auto", "hf_name": "x/imdb", "hf_timeout_s": 1, "seed": 0, "eval_fraction": 0.1}
    with pytest.raises(DataError, match="not AG News|no test split"):
        sources.load_corpus(cfg, tmp_path)


@pytest.mark.unit
def test_ag_news_from_the_hub_passes_by_its_class_names_or_its_four_values(monkeypatch, tmp_path):
    datasets = pytest.importorskip("datasets")
    for names in (AG_NEWS, None):
        monkeypatch.setattr(datasets, "load_dataset",
                            lambda name, cache_dir: hub({"train": [0, 3, 1], "test": [2]}, names))
        corpus = sources.load_hf("fancyzhx/ag_news", tmp_path)
        assert corpus.train_labels == [0, 3, 1] and corpus.eval_labels == [2]
        assert corpus.description.startswith("AG News (hub dataset fancyzhx/ag_news: 3 train / 1 test rows)")
