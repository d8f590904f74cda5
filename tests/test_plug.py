"""A model the user brings: the adapter, the checks that refuse a bad plug (each naming its key), what a plugged
model cannot run, and a tiny transformers BERT trained and compiled through the study's own run."""

from __future__ import annotations

import copy
import json

import pytest
import torch
import yaml

from compile_study.core import layout, vocab
from compile_study.core.config import config_check, config_schema
from compile_study.core.models import plug_check
from compile_study.core.models.model import ModelConfig, TextClassifier
from compile_study.core.models.plug import PlugError, Plugged, build_model, load_factory, model_class, n_params
from compile_study.core.models.plug_check import check_fits, check_output, check_plug
from compile_study.core.record import RunConfig

from .conftest import REPO, TINY_MODEL
from .plug_models import TINY_BERT

CPU = torch.device("cpu")
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
BASE = yaml.safe_load((REPO / "config.yaml").read_text())


def plugged(**model) -> ModelConfig:
    return ModelConfig(vocab_size=50, **(TINY_MODEL | model))


def factory(name: str) -> ModelConfig:
    return plugged(factory=f"tests.plug_models:{name}")


@pytest.mark.unit
def test_the_built_in_model_is_built_unwrapped_with_the_same_weights():
    cfg = ModelConfig(vocab_size=50, **TINY_MODEL)
    torch.manual_seed(0)
    built = build_model(cfg)
    torch.manual_seed(0)
    direct = TextClassifier(cfg)
    assert type(built) is TextClassifier  # no adapter: its compiled graphs are the study's without plugs
    assert all(torch.equal(a, b) for a, b in zip(built.state_dict().values(), direct.state_dict().values()))


@pytest.mark.unit
def test_a_factory_model_is_called_with_ids_and_the_mask_the_padding_id_gives():
    model = build_model(factory("good"))
    ids = torch.tensor([[5, 6, 7, 0], [8, 0, 0, 0]])
    logits = model(ids)
    assert isinstance(model, Plugged) and logits.shape == (2, 4)
    mask = model.inner.masks[-1]
    assert mask.dtype == torch.int64 and mask.tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]]
    assert model_class(model) == "tests.plug_models.MeanClassifier" and n_params(model) == 50 * 16 + 16 * 4 + 4


@pytest.mark.unit
def test_dropout_zero_switches_a_plugged_models_dropout_off_and_otherwise_keeps_its_own():
    assert build_model(plugged(factory="tests.plug_models:good", dropout=0.2)).inner.drop.p == 0.1  # its own
    assert build_model(plugged(factory="tests.plug_models:good", dropout=0.0)).inner.drop.p == 0.0


@pytest.mark.unit
def test_a_transformers_model_is_built_from_its_config_with_the_studys_vocabulary_and_classes():
    model = build_model(plugged(hf_config=TINY_BERT))
    config = model.inner.config
    assert (config.vocab_size, config.num_labels, config.pad_token_id) == (50, 4, 0)
    assert model_class(model) == "transformers.models.bert.modeling_bert.BertForSequenceClassification"
    assert model.training and model(torch.tensor([[3, 4, 0]])).shape == (1, 4)


BAD_PLUGS = [
    ("no_colon", "model.factory: 'no_colon' is not an import path of the form package.module:function"),
    ("tests.no_such_module:make", "model.factory: cannot import 'tests.no_such_module' (ModuleNotFoundError"),
    ("tests.plug_models:missing", "model.factory: module 'tests.plug_models' has no function 'missing'"),
    ("tests.plug_models:wrong_signature", "model.factory: tests.plug_models:wrong_signature takes (vocab, "
                                          "classes), but the study calls it as wrong_signature(vocab_size=..., "
                                          "n_classes=..., max_len=...)"),
    ("tests.plug_models:not_a_module", "model.factory: tests.plug_models:not_a_module returned a function, not "
                                       "a torch.nn.Module"),
]


@pytest.mark.unit
@pytest.mark.parametrize("spec, message", BAD_PLUGS)
def test_a_factory_that_cannot_be_loaded_is_named_with_its_key(spec, message):
    with pytest.raises(PlugError) as err:
        build_model(plugged(factory=spec))
    assert str(err.value).startswith(message)


@pytest.mark.unit
@pytest.mark.parametrize("name, message", [
    ("ids_only", "model.factory: the model cannot be called as model(ids, attention_mask) on ids [2, 32]: "
                 "TypeError"),
    ("seven_classes", "model.factory: the model returned logits of shape [2, 7] (torch.float32) for 2 sequences; "
                      "the study needs floating-point logits [2, 4]"),
    ("tupled", "model.factory: the model returned a tuple; the study needs logits"),
])
def test_a_model_with_the_wrong_call_or_output_is_refused_by_its_key(name, message):
    cfg = factory(name)
    with pytest.raises(PlugError) as err:
        check_output(cfg, build_model(cfg), CPU)
    assert str(err.value).startswith(message)


@pytest.mark.unit
@pytest.mark.parametrize("hf, message", [
    ({"model_type": "no-such-architecture"}, "model.hf_config.model_type: 'no-such-architecture' is not one of "
                                             "the "),
    (TINY_BERT | {"vocab_size": 99}, "model.hf_config.vocab_size: set by the study"),
    ({"model_type": "vit"}, "model.hf_config.model_type: 'vit' has no sequence-classification model in transformers"),
    (TINY_BERT | {"hidden_size": 31}, "model.hf_config: transformers cannot build bert from it (The hidden size (31)"),
])
def test_a_bad_transformers_config_is_named_with_its_key(hf, message):
    with pytest.raises(PlugError) as err:
        build_model(plugged(hf_config=hf))
    assert str(err.value).startswith(message)


@pytest.mark.unit
def test_a_model_that_does_not_fit_the_device_is_refused_before_it_is_built(monkeypatch):
    with pytest.raises(PlugError) as err:
        check_fits(factory("good"), 10**9, 2**30, "a test device")
    assert str(err.value).startswith("model.factory: the model has 1,000.0 M parameters; training holds about "
                                     "14.9 GiB for them before any activation")
    assert str(err.value).endswith("more than the 1.0 GiB of a test device")
    # check_plug asks before building on the device: a 1 KiB device refuses even the smallest model
    monkeypatch.setattr("compile_study.core.models.plug_check.capacity_bytes", lambda device: (1024, "a 1 KiB device"))
    with pytest.raises(PlugError, match="^model.hf_config: the model has 0.0 M parameters"):
        check_plug(plugged(hf_config=TINY_BERT), CPU)


@pytest.mark.unit
def test_a_good_plug_passes_every_check_and_says_what_it_is():
    facts = check_plug(plugged(hf_config=TINY_BERT), CPU)
    assert facts["key"] == "model.hf_config" and facts["class"].endswith("BertForSequenceClassification")
    assert facts["params"] == n_params(build_model(plugged(hf_config=TINY_BERT)))
    assert facts["flops"]["counted_on"] == "fake tensors" and facts["train_flops_per_token"] > 0
    assert load_factory("tests.plug_models:good")(vocab_size=3, n_classes=2, max_len=4).head.out_features == 2


# ---------------------------------------------------------------- the config, before any job


def errors_of(model: dict, grids: list[dict] | None = None) -> list[str]:
    from snakemake.utils import validate

    cfg = copy.deepcopy(BASE)
    cfg["model"] |= model
    if grids is not None:
        cfg["grids"]["cpu"] = grids
    assert config_schema.schema_errors(cfg, SCHEMA) == []
    validate(cfg, str(SCHEMA))
    return [str(e) for e in config_check.semantic_errors(cfg, devices=["cpu"])]


@pytest.mark.unit
@pytest.mark.parametrize("model, message", [
    ({"factory": "tests.plug_models:good", "hf_config": TINY_BERT},
     "model.factory and model.hf_config: set one of them, not both"),
    ({"factory": "tests/plug_models.py"}, "model.factory: 'tests/plug_models.py' is not an import path"),
    ({"factory": "no_such_package.models:make"}, "model.factory: no module 'no_such_package.models' can be imported"),
    ({"hf_config": {"num_hidden_layers": 2}}, "model.hf_config.model_type: missing"),
    ({"hf_config": TINY_BERT | {"num_labels": 4, "max_position_embeddings": 512}},
     "model.hf_config.num_labels: set by the study"),
    ({"hf_config": TINY_BERT}, "model.hf_config.max_position_embeddings: 32 is less than model.max_len (128)"),
])
def test_a_bad_plug_in_the_config_fails_at_load_naming_the_key(model, message):
    errors = errors_of(model)
    assert len(errors) == 1 and errors[0].startswith(message)


@pytest.mark.unit
def test_a_sub_grid_a_plugged_model_can_make_no_run_of_is_refused_and_a_mixed_one_is_not():
    only_packed = {"name": "packing", "compile_mode": ["eager", "default"], "shape_regime": ["packed"]}
    mixed = {"name": "padding", "compile_mode": ["eager"], "shape_regime": ["static", "packed"]}
    good = {"factory": "tests.plug_models:good"}
    (error,) = errors_of(good, [only_packed, mixed])
    assert error.startswith("grids.cpu[0] (packing): a plugged model (model.factory) can make none of its runs: "
                            "packed rows need the built-in model's packed path")
    assert errors_of({}, [only_packed, mixed]) == []  # the built-in model runs them all


@pytest.mark.unit
def test_what_a_plugged_model_cannot_run_is_said_with_the_reason():
    assert vocab.plug_not_applicable("graph-break", "static").startswith("graph-break swaps the built-in model's")
    assert vocab.plug_not_applicable("module", "packed").startswith("packed rows need")
    assert vocab.plug_not_applicable("step-graph", "bucketed-32-64-128") is None


@pytest.mark.unit
def test_each_model_has_its_own_study_directory():
    assert layout.study_root("cuda", {}) == "results/cuda"  # the built-in model's, as before plugs
    assert layout.study_root("cuda", {"hf_config": TINY_BERT}) == "results/cuda-hf-bert"
    assert layout.study_root("cpu", {"factory": "pkg.mod:make_net"}) == "results/cpu-make_net"
    assert layout.study_root("cuda", {"name": "bert small", "hf_config": TINY_BERT}) == "results/cuda-bert-small"


# ---------------------------------------------------------------- runs of a plugged model


@pytest.mark.unit
@pytest.mark.parametrize("scope, regime", [("module", "packed"), ("graph-break", "static")])
def test_a_run_a_plugged_model_cannot_make_is_recorded_not_applicable_before_anything_is_timed(
        synthetic_data, scope, regime):
    from compile_study.core.models.model import model_config_for
    from compile_study.measure.run import run_and_record

    cfg = model_config_for(synthetic_data, TINY_MODEL | {"factory": "tests.plug_models:good"})
    rec = run_and_record(cfg, RunConfig("default", 8, regime, "fp32", 0, compile_scope=scope), synthetic_data, "cpu")
    assert rec["status"] == "not_applicable" and rec["error"].endswith("(model.factory)")
    assert rec["error"].startswith(vocab.plug_not_applicable(scope, regime)[:30])
    assert "steady_step_ms" not in rec["metrics"] and rec["metrics"]["overhead_s"]["timed_s"] == 0


@pytest.mark.compile
def test_a_tiny_bert_trains_compiled_whole_in_default_mode_through_the_studys_run(synthetic_data):
    """transformers' BERT under torch.compile(fullgraph=True), default mode, CPU: one graph, no break."""
    from compile_study.core.models.flops import step_flops
    from compile_study.core.models.model import model_config_for
    from compile_study.measure.run import run_and_record

    model_cfg = model_config_for(synthetic_data, TINY_MODEL | {"hf_config": TINY_BERT})
    cfg = RunConfig("default", 8, "static", "fp32", 0, warmup_steps=2, timed_steps=4, interleave_chunk=2,
                    max_epoch_steps=3, evidence=False)
    rec = run_and_record(model_cfg, cfg, synthetic_data, "cpu", threads=2)
    m = rec["metrics"]
    assert rec["status"] == "ok", rec.get("traceback")
    assert (m["graphs_compiled"], m["graph_breaks"], m["recompiles"]) == (1, 0, 0)
    assert m["model_class"].endswith("BertForSequenceClassification") and m["model_params"] > 0
    assert rec["config"]["model"]["hf_config"]["model_type"] == "bert"
    counted = step_flops(model_cfg)
    assert m["train_flops_per_step"] == counted.padded(8, TINY_MODEL["max_len"])
    assert m["train_flops_per_token"] == counted.per_token() and m["in_process_speedup"] > 0


@pytest.mark.dag
def test_a_plug_with_the_wrong_output_stops_the_study_before_its_first_timed_run(tmp_path):
    import os
    import subprocess
    import sys

    from .test_workflow import write_tiny_config

    write_tiny_config(tmp_path)
    cfg = yaml.safe_load((tmp_path / "config.yaml").read_text())
    cfg["model"]["factory"] = "tests.plug_models:seven_classes"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    # where the jobs import tests.plug_models from, before what the environment has there (Snakemake, maybe)
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    root = tmp_path / "results" / "cpu-seven_classes"  # a plugged model's own study directory
    record = root / "runs/static/fp32/default/module/bs16/r0.json"  # a timed run: it waits for check_model
    res = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--cores", "2",
                          "--workflow-profile", str(REPO / "profiles" / "default"), "--directory", str(tmp_path),
                          str(record.relative_to(tmp_path))],
                         capture_output=True, text=True, timeout=900, cwd=tmp_path, env=env)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "check_model: model.factory: the model returned logits of shape [2, 7]" in out
    assert not record.exists() and not (root / "model.json").exists() and "Traceback" not in out


@pytest.mark.unit
def test_the_shipped_bert_config_is_the_built_in_models_size_and_has_its_own_study(tmp_path):
    from compile_study.core.config import grid

    config = grid.load_config([REPO / "config.yaml", REPO / "configs" / "gpu-quick.yaml",
                               REPO / "configs" / "hf-bert.yaml"])
    assert config_check.semantic_errors(config) == []
    model, hf = config["model"], config["model"]["hf_config"]
    assert (hf["num_hidden_layers"], hf["num_attention_heads"], hf["hidden_size"], hf["intermediate_size"]) == (
        model["n_layers"], model["n_heads"], model["d_model"], model["d_ff"])
    assert hf["max_position_embeddings"] >= model["max_len"]
    quick = grid.load_config([REPO / "config.yaml", REPO / "configs" / "gpu-quick.yaml"])
    assert set(grid.expand(config["grids"]["cuda"])) == set(grid.expand(quick["grids"]["cuda"]))  # the same cells
    assert grid.record_path("cuda", next(iter(grid.expand(config["grids"]["cuda"]))), model).startswith(
        "results/cuda-hf-bert/runs/")


# ---------------------------------------------------------------- python -m compile_study model


def _model_command(tmp_path, monkeypatch, capsys, *args) -> tuple[dict, str]:
    """`python -m compile_study model` on config.yaml with a tiny plugged BERT (as hf-bert, smaller), run in
    tmp_path (no resources/data, no results/ there unless a test makes them): its JSON and its stderr."""
    overlay = tmp_path / "tiny-bert.yaml"
    overlay.write_text(yaml.safe_dump({"model": TINY_MODEL | {"name": "tiny-bert", "hf_config": TINY_BERT}}))
    monkeypatch.chdir(tmp_path)
    plug_check.main([str(REPO / "config.yaml"), str(overlay), *args])
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def _prepared(directory, vocab_size: int, max_len: int = TINY_MODEL["max_len"]):
    directory.mkdir(parents=True, exist_ok=True)
    facts = {"vocab_size": vocab_size, "max_len": max_len, "source": "synthetic",
             "description": "synthetic stand-in (8,000 rows)"}
    (directory / "facts.json").write_text(json.dumps(facts))
    return directory


@pytest.mark.unit
def test_the_model_command_counts_with_the_prepared_datas_vocabulary_and_says_so(tmp_path, monkeypatch, capsys):
    """The study trains with the vocabulary its tokenizer learned (271 tokens on the synthetic data), not with
    data.vocab_size's 8,192: the printed parameters are the ones the study's model.json will hold."""
    _prepared(tmp_path / "resources" / "data", 271)
    facts, said = _model_command(tmp_path, monkeypatch, capsys)
    at_271 = n_params(build_model(ModelConfig(vocab_size=271, **TINY_MODEL, hf_config=TINY_BERT)))
    at_limit = n_params(build_model(ModelConfig(vocab_size=8192, **TINY_MODEL, hf_config=TINY_BERT)))
    assert facts["params"] == at_271 and at_limit - at_271 == (8192 - 271) * TINY_BERT["hidden_size"]
    assert facts["config"]["vocab_size"] == 271
    assert facts["vocab_from"] == "resources/data/facts.json: the prepared data (synthetic stand-in (8,000 rows))"
    assert said == "vocabulary: 271 tokens, from resources/data/facts.json: the prepared data (synthetic stand-in " \
                   "(8,000 rows))\n"
    # the study's own copy (results/cpu-tiny-bert/facts.json) comes before the project's prepared data
    _prepared(tmp_path / "results" / "cpu-tiny-bert", 300)
    config = {"data": {"vocab_size": 8192, "source": "auto"}, "model": TINY_MODEL}
    places = [tmp_path, tmp_path / "results" / "cpu-tiny-bert", tmp_path / "resources" / "data"]
    assert plug_check.study_vocab(config, places)[0] == 300


@pytest.mark.unit
def test_without_prepared_data_the_model_command_says_its_count_assumes_the_tokenizers_limit(
        tmp_path, monkeypatch, capsys):
    _prepared(tmp_path / "resources" / "data", 271, max_len=128)  # prepared for another model.max_len: not ours
    monkeypatch.setattr(plug_check, "check_plug", lambda cfg, device: {"config": cfg.to_dict()})  # the count: above
    facts, said = _model_command(tmp_path, monkeypatch, capsys)
    assert facts["config"]["vocab_size"] == 8192
    assert said.startswith("vocabulary: 8,192 tokens, from config data.vocab_size, the tokenizer's limit: the study "
                           "trains with the vocabulary its tokenizer learns from the data")
    assert facts["vocab_from"].endswith("prepare the data (snakemake --cores 1 resources/data/facts.json) or pass "
                                        "--data for the study's own count")


@pytest.mark.unit
def test_data_named_with_data_that_cannot_be_the_studys_is_refused_by_name(tmp_path, monkeypatch, capsys):
    _prepared(tmp_path / "other", 271, max_len=128)
    with pytest.raises(SystemExit, match="^--data other: it was prepared for max_len 128, the config's model.max_len "
                                         "is 32$"):
        _model_command(tmp_path, monkeypatch, capsys, "--data", "other")
    with pytest.raises(SystemExit, match="^--data nowhere: no facts.json there"):
        _model_command(tmp_path, monkeypatch, capsys, "--data", "nowhere")
