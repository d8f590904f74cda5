"""The vocabulary is written once: the schema, the rules' wildcards and the grid agree with vocab.py."""

from __future__ import annotations

import re

import pandas as pd
import pytest
import yaml

from compile_study.core import vocab
from compile_study.core.config import grid
from compile_study.core.record import RunConfig

from .conftest import REPO

pytestmark = pytest.mark.unit

SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())


def _enum(key: str) -> list[str]:
    return SCHEMA["definitions"]["grid"]["properties"][key]["items"]["enum"]


def test_schema_enums_are_the_vocabulary():
    assert tuple(_enum("compile_mode")) == vocab.COMPILE_MODES
    assert tuple(_enum("compile_scope")) == vocab.COMPILE_SCOPES
    assert tuple(_enum("precision")) == vocab.PRECISIONS
    assert tuple(_enum("shape_regime")) == vocab.REGIME_KINDS
    assert set(vocab.SCOPE_MODES) == set(vocab.COMPILE_SCOPES)


def test_each_word_is_listed_once_and_every_other_list_follows_it():
    """A new mode, scope or regime is one edit of vocab.py (and the schema's enum, held to it above): the scopes'
    modes, the whole-step graph's modes, the wildcards and the figures' colours follow, and the schema's
    description of the scopes names every scope."""
    from compile_study.aggregate.figures.figures import MODE_COLOURS, SCOPE_MARKERS
    from compile_study.measure.step_graph import GRAPH_COMPILE_MODES

    compiled = vocab.COMPILE_MODES[1:]
    assert vocab.COMPILED_MODES == compiled and vocab.SCOPE_MODES["step"] == vocab.SCOPE_MODES["graph-break"] == compiled
    assert vocab.SCOPE_MODES["regional"] == compiled  # eager is the module's run
    assert vocab.SCOPE_MODES["module"] == vocab.SCOPE_MODES["fused-adamw"] == vocab.COMPILE_MODES
    assert set(vocab.SCOPE_MODES["step-graph"]) == set(compiled) - set(vocab.CUDAGRAPH_MODES)  # the capture is the graph
    assert GRAPH_COMPILE_MODES == ("eager", *vocab.SCOPE_MODES["step-graph"])
    # step-graph's control captures the same step eagerly: eager only, and CUDA only like the step graph
    assert vocab.SCOPE_MODES["eager-step-graph"] == ("eager",)
    assert set(vocab.GRAPH_SCOPES) == set(vocab.CUDA_ONLY_SCOPES) == {"step-graph", "eager-step-graph"}
    assert vocab.EAGER_SCOPES == ("module", "fused-adamw", "eager-step-graph")
    assert list(MODE_COLOURS) == list(vocab.COMPILE_MODES)  # a mode without a colour would fail in a figure
    # so would a scope without a marker of its own
    assert set(SCOPE_MARKERS) == set(vocab.COMPILE_SCOPES) and len(set(SCOPE_MARKERS.values())) == len(SCOPE_MARKERS)
    assert set(vocab.PACKED_SCOPES) <= set(vocab.COMPILE_SCOPES) and set(vocab.TRAINING_SCOPES) <= set(vocab.COMPILE_SCOPES)
    assert {scope for scope, _ in vocab.SCOPE_REGIME_NOT_APPLICABLE} <= set(vocab.COMPILE_SCOPES)
    assert {kind for _, kind in vocab.SCOPE_REGIME_NOT_APPLICABLE} <= set(vocab.REGIME_KINDS)
    regime = re.compile(f"(?:{vocab.wildcard_constraints()['shape_regime']})")
    assert all(regime.fullmatch(k) for k in vocab.REGIME_KINDS if k != "bucketed") and regime.fullmatch("bucketed-8-16")
    described = SCHEMA["definitions"]["grid"]["properties"]["compile_scope"]["description"]
    assert [s for s in vocab.COMPILE_SCOPES if not re.search(rf"(?<![\w-]){s}(?![\w-])", described)] == []


def test_the_paper_has_words_for_every_scope_and_regime():
    from compile_study.report.document import Text
    from compile_study.report.paper import words

    for scope in vocab.COMPILE_SCOPES:
        assert len(words(Text("terms", "scope", {"s": scope})).split()) >= 5, scope
    for kind in vocab.REGIME_KINDS:
        assert len(words(Text("terms", "regime", {"k": kind})).split()) >= 5, kind


def test_wildcard_constraints_accept_every_run_name_and_nothing_else():
    c = {k: re.compile(f"(?:{v})") for k, v in vocab.wildcard_constraints().items()}
    for mode in vocab.COMPILE_MODES:
        assert c["compile_mode"].fullmatch(mode)
    for scope in vocab.COMPILE_SCOPES:
        assert c["compile_scope"].fullmatch(scope)
    for regime in ("static", "dynamic", "dynamic-marked", "bucketed-32-64-128", "packed"):
        assert c["shape_regime"].fullmatch(regime)
    for bad in ("bucketed", "dynamic-maybe", "Static"):
        assert not c["shape_regime"].fullmatch(bad)
    assert not c["compile_mode"].fullmatch("max-autotune-no")


def test_a_regime_is_parsed_once_into_what_it_implies():
    r = vocab.Regime.parse("bucketed-32-64-128")
    assert (r.kind, r.edges, r.compile_kwargs(), r.reference) == ("bucketed", (32, 64, 128), {"dynamic": False}, r.name)
    d = vocab.Regime.parse("dynamic-true")
    assert d.is_dynamic and d.compiled_only and d.reference == "dynamic" and d.compile_kwargs() == {"dynamic": True}
    assert vocab.Regime.parse("dynamic-marked").marks_dynamic
    assert vocab.Regime.parse("static").compile_kwargs() == {"dynamic": None}
    with pytest.raises(ValueError, match="strictly increasing"):
        vocab.Regime.parse("bucketed-64-32-128").check(128)
    with pytest.raises(ValueError, match="shape_regime 'bucketed'"):
        vocab.Regime.parse("bucketed")


def test_grid_expansion_follows_the_scope_rules():
    g = {"name": "g", "compile_mode": list(vocab.COMPILE_MODES), "compile_scope": list(vocab.COMPILE_SCOPES),
         "batch_size": [8], "shape_regime": ["static", "dynamic-true"], "bucket_sets": [[8]], "precision": ["fp32"],
         "repeats": 1}
    runs = grid.expand([g])
    for k in runs:
        assert vocab.runs_with(k.compile_mode, k.compile_scope, k.shape_regime)
        assert k.compile_mode in vocab.SCOPE_MODES[k.compile_scope] or (
            k.compile_mode == "eager" and k.compile_scope in ("module", "fused-adamw"))
    assert ("eager", "module", 8, "dynamic-true", "fp32", 0) not in runs  # eager's reference is `dynamic`
    assert ("reduce-overhead", "forward", 8, "static", "fp32", 0) not in runs
    assert ("max-autotune-no-cudagraphs", "step-graph", 8, "static", "fp32", 0) in runs
    assert ("default", "regional", 8, "static", "fp32", 0) in runs
    assert ("eager", "regional", 8, "static", "fp32", 0) not in runs  # eager compiles no block: module's run
    for key in runs:  # every expanded run is a valid RunConfig
        assert RunConfig(**key._asdict()).key() == key


def test_headline_and_usable_are_the_one_selection():
    df = pd.DataFrame({"shape_regime": ["static", "static", "dynamic"], "compile_scope": ["module", "step", "module"],
                       "status": ["partial", "oom", "ok"]})
    assert list(vocab.headline(df).index) == [0]
    assert list(vocab.usable(df).index) == [0, 2]  # a partly failed configuration has numbers, in every view


def test_run_and_model_defaults_are_the_schemas():
    """The schema writes every default once; RunConfig's and ModelConfig's (for direct callers and tests)
    must say the same, field by field."""
    from dataclasses import MISSING, fields

    from compile_study.core.models.model import ModelConfig

    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    props = schema["definitions"]["grid"]["properties"] | schema["properties"]["train"]["properties"]
    run = {f.name: f.default for f in fields(RunConfig) if f.default is not MISSING and f.name in props}
    axis = {name: [value] for name, value in run.items() if isinstance(props[name]["default"], list)}  # a grid axis
    assert run | axis == {name: props[name]["default"] for name in run}
    assert set(run) >= set(grid.STEP_KEYS) | {"lr", "seed"}  # every step setting a sub-grid can give
    model_props = schema["properties"]["model"]["properties"]
    model = {f.name: f.default for f in fields(ModelConfig) if f.name in model_props}
    assert model == {name: model_props[name]["default"] for name in model} and len(model) == len(model_props)


def test_the_eager_step_graph_compiles_nothing_in_the_plan():
    """The control runs as eager (compile mode eager at scope eager-step-graph, each repeat), so the compile phase
    has no cold compile, portable start or parity check of it, whatever the sub-grid lists beside it."""
    sub = grid.grid_defaults() | {"name": "graphs", "compile_mode": ["eager", "default"],
                                  "compile_scope": ["step-graph", "eager-step-graph"], "batch_size": [32],
                                  "precision": ["bf16"], "repeats": 3}
    runs = grid.expand([sub])
    assert sorted({(k.compile_mode, k.compile_scope) for k in runs}) == [("default", "step-graph"),
                                                                         ("eager", "eager-step-graph")]
    assert len(runs) == 6
    compiles = grid.compiles(runs, n_cold=3, n_portable=2)
    assert [(k.compile_mode, k.compile_scope) for k in compiles] == [("default", "step-graph")]
    assert grid.parity_pairs(runs) == [("bf16", "default")]
