"""How much hosts of one kind differ (compile_study/aggregate/compare/hosts.py), what the stored studies say of each other
with it (aggregate/compare/reruns.py: pairs, leave one study out) and how the README quotes it (report/compare/host_effect.py)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from compile_study.aggregate.compare import compare as cmp
from compile_study.aggregate.compare import hosts, reruns
from compile_study.core import digits
from compile_study.core.layout import host_effect_path
from compile_study.report.compare import host_effect

from .conftest import REPO

KIND = "NVIDIA H200"


def study(rng, host: dict[tuple, float], n: int = 3, sd: float = 0.03, base: float = 0.4) -> pd.DataFrame:
    """Run records (the columns hosts reads) of one study: per configuration (batch, mode, scope) its host's
    effect on the log speedup, n processes scattering by sd about it."""
    rows = []
    for (batch, mode, scope), effect in host.items():
        for r in range(n):
            rows.append({"shape_regime": "static", "precision": "bf16", "batch_size": batch, "compile_mode": mode,
                         "compile_scope": scope, "repeat": r, "status": "ok",
                         "in_process_speedup": float(np.exp(base + effect + rng.normal(0, sd))),
                         "steady_step_ms": 9.0, "profile_device_busy_ms_per_step": busy(batch, mode) if r == 0 else np.nan})
    return pd.DataFrame(rows)


def busy(batch: int, mode: str) -> float:
    """The GPU's busy time per 9-ms step: eager's and every mode's host-bound at batch 32; at 512 `default` waits
    on the host (idle 1.125) and the rest are device-bound (1.0)."""
    return 8.0 if batch < 512 or mode == "default" else 9.0


CONFIGS = [(32, "default", "module"), (32, "reduce-overhead", "module"), (512, "default", "module"),
           (512, "reduce-overhead", "module"), (512, "eager", "module")]


@pytest.mark.unit
def test_a_configuration_is_classed_by_what_sets_the_pace_of_its_two_steps():
    over, waits, both, bound = hosts.CLASSES[1:]
    assert hosts.class_of(32, "eager", "fused-adamw") == hosts.class_of(512, "eager", "module") == "eager against eager"
    assert hosts.class_of(32, "reduce-overhead", "module", 3.0, 6.8) == over  # a graph over eager waiting on the host
    assert hosts.class_of(32, "reduce-overhead", "module") == over  # eager unprofiled at a small batch: host-bound
    assert hosts.class_of(512, "default", "step-graph", None, 1.03) == bound  # both sides device-bound
    assert hosts.class_of(512, "max-autotune", "module", 1.3, 1.2) == over  # eager's step waits on the host
    assert hosts.class_of(512, "default", "module", 1.01, 1.03) == bound  # GPU busy on both sides
    assert hosts.class_of(256, "default", "module", 1.01, 1.5) == over
    assert hosts.class_of(512, "default", "module", 1.10, 1.03) == waits  # launches from the host outlast its work
    assert hosts.class_of(32, "default", "module", 6.9, 6.8) == both  # two host-bound sides
    assert hosts.class_of(32, "default", "module") == both
    assert hosts.class_of(512, "default", "module") == waits  # none profiled
    assert hosts.class_of(512, "default", "module", float("nan"), float("nan")) == waits


@pytest.mark.unit
def test_each_side_s_pace_is_read_from_its_own_profiled_processes():
    rng = np.random.default_rng(2)
    paces = hosts.paces(study(rng, dict.fromkeys([*CONFIGS, (32, "eager", "module")], 0.0)))
    assert paces.loc[("static", "bf16", 32, "reduce-overhead", "module")].tolist() == [1.125, 1.125]
    assert paces.loc[("static", "bf16", 512, "reduce-overhead", "module")].tolist() == [1.0, 1.0]
    assert paces.loc[("static", "bf16", 512, "default", "module")].tolist() == [1.125, 1.0]


@pytest.mark.unit
def test_the_estimate_finds_a_known_host_effect_and_none_where_there_is_none():
    """Many simulated studies, each on its own host: the pooled method-of-moments estimate of tau^2 is unbiased
    before truncation, so over 40 studies it lands near the truth; a class without a host effect gets ~0."""
    rng = np.random.default_rng(3)
    truth = {(32, "default", "module"): 0.15, (32, "reduce-overhead", "module"): 0.0,
             (512, "default", "module"): 0.15, (512, "reduce-overhead", "module"): 0.0,
             (512, "eager", "module"): 0.0}
    studies = {f"s{i}": study(rng, {k: rng.normal(0, sd) if sd else 0.0 for k, sd in truth.items()})
               for i in range(40)}
    effect = hosts.estimate(studies)
    assert effect.loc[hosts.WAITS, "sd"] == pytest.approx(0.15, rel=0.25)
    assert effect.loc["device-bound", "sd"] < 0.02 and effect.loc["eager against eager", "sd"] < 0.02
    assert effect.loc["both wait on the host", "sd"] == pytest.approx(0.15, rel=0.25)
    assert effect.loc[hosts.WAITS, "df"] == 39 and effect.loc[hosts.WAITS, "configurations"] == 1
    assert effect.loc[hosts.WAITS, "cells"] == 40 and effect.loc[hosts.WAITS, "processes"] == 120
    assert (effect.sd_ratio == np.exp(effect.sd)).all()


@pytest.mark.property  # a simulation of the rule: the statistical properties' tier
def test_the_pooled_excess_is_unbiased_over_replicate_studies():
    rng = np.random.default_rng(4)
    excess = []
    for _ in range(200):  # three studies a time, as stored, one configuration
        found = {f"s{i}": study(rng, {(512, "default", "module"): rng.normal(0, 0.1)}) for i in range(3)}
        excess.append(hosts.estimate(found).loc[hosts.WAITS, "pooled_excess"])
    assert np.mean(excess) == pytest.approx(0.01, rel=0.2)  # tau^2, though one estimate on 2 df strays far


@pytest.mark.unit
def test_a_configuration_one_study_alone_ran_or_with_too_few_processes_is_not_shared():
    rng = np.random.default_rng(5)
    a = study(rng, {(512, "default", "module"): 0.0})
    b = study(rng, {(512, "default", "module"): 0.3, (32, "default", "module"): 0.0})
    few = study(rng, {(32, "default", "module"): 0.0}, n=2)
    found = hosts.shared_cells({"a": a, "b": b, "few": few})
    assert set(found.batch_size) == {512} and set(found.study) == {"a", "b"}
    effect = hosts.estimate({"a": a, "b": b, "few": few})
    over = "compiled over host-bound eager"
    assert np.isnan(effect.loc[over, "sd"]) and effect.loc[over, "df"] == 0
    assert hosts.sd_of(hosts.effect_dict(effect), 32, "reduce-overhead", "module") == (over, 0.0, float("inf"))


@pytest.fixture(scope="module")
def built() -> dict:
    return reruns.build(REPO)


@pytest.mark.golden
def test_the_stored_estimate_is_what_the_stored_studies_give_today(built):
    """reference/host-effect.json is current (rerun `python -m compile_study host-effect` and `python -m compile_study
    readme README.md`, or `rebuild --all`, after a stored study is added or the estimate changes), and so is
    docs/reproduction.md's block, made from it."""
    assert json.loads(host_effect_path(REPO).read_text()) == json.loads(digits.dumps(built))
    assert f"{host_effect.BEGIN}\n{host_effect.block(built)}\n{host_effect.END}" in (REPO / "docs" / "reproduction.md").read_text()


@pytest.mark.golden
def test_the_stored_h200_studies_give_each_class_with_its_n(built):
    found = built["kinds"][KIND]
    assert len(found["studies"]) >= 3 and all(n.startswith("reference/h200-") for n in found["studies"])
    assert not any("bert" in n for n in found["studies"])  # a plugged model's study answers another question
    classes = found["classes"]
    assert list(classes) == list(hosts.CLASSES) and all(c["studies"] == len(found["studies"]) for c in classes.values())
    assert sum(c["configurations"] for c in classes.values()) >= 7  # the configurations the reruns share
    # the class that waits on the host differs between hosts far more than any other
    waits = classes[hosts.WAITS]["sd"]
    assert waits > 0.05 and all(c["sd"] < waits / 2 for name, c in classes.items() if name != hosts.WAITS)


@pytest.mark.golden
def test_no_stored_rerun_differs_where_the_host_effect_explains_it_and_leave_one_out_counts_what_rests_on_one(built):
    found = built["kinds"][KIND]
    for pair in found["pairs"]:
        assert pair["counts"]["differs"] == 0, pair["verdicts"]
        assert pair["counts"]["judged"] == pair["without_host_effect"]["judged"] == pair["counts"]["shared"]
    case = next(c for c in found["spread"] if c["configuration"] == ["static", "bf16", 512, "default", "module"])
    assert case["kernels"]["cause"] == "host" and case["first_loaded"]  # one work per step; each ran its first
    assert case["compiles_differ"]  # yet cold compiles of one configuration on one host generated 124 or 127
    before = sum(p["without_host_effect"]["differs"] for p in found["pairs"])
    assert before >= 1  # the rule before the host effect called a faithful rerun different
    loo = found["leave_one_out"]
    assert loo["judged"] == sum(s["judged"] for s in loo["by_study"].values())
    assert loo["changed"] == sum(s["changed"] for s in loo["by_study"].values()) <= loo["judged"]
    for s in loo["by_study"].values():  # every change is a verdict of the study left out
        assert all(name in c["pair"] for c in s["changes"] for name in [k for k in loo["by_study"]
                                                                         if loo["by_study"][k] is s])


@pytest.mark.unit
def test_studies_alike_have_no_host_effect_and_nothing_changes_leaving_one_out():
    """Three copies of one stored study: every study mean alike, so every class's estimate is 0, every shared
    configuration is judged the same with or without any one of them, and none differs."""
    one = cmp.load(REPO / "reference/h200-quick-2026-12-03")
    studies = {f"copy{i}": one for i in range(3)}
    full = reruns._tables(studies, KIND, reruns._estimate(studies, list(studies)),
                          reruns.pairs(list(studies), studies))
    sds = [c["sd"] for c in reruns._estimate(studies, list(studies)).values()]
    assert all(sd == 0 or np.isnan(sd) for sd in sds) and sds.count(0) >= 3  # (NaN: no configuration of it)
    loo = reruns.leave_one_out(studies, KIND, full)
    assert loo["changed"] == 0 and loo["judged"] == 3 * 2 * len(full[("copy0", "copy1")])
    assert not any(t.verdict.str.startswith("differs").any() for t in full.values())


@pytest.mark.unit
def test_pairs_put_the_study_with_more_records_on_the_stored_side():
    rng = np.random.default_rng(6)
    big = cmp.Study(study(rng, dict.fromkeys(CONFIGS, 0.0)), None)
    small = cmp.Study(study(rng, {CONFIGS[0]: 0.0}), None)
    assert reruns.pairs(["b", "a", "c"], {"a": small, "b": big, "c": small}) == [("b", "a"), ("b", "c"), ("a", "c")]


@pytest.mark.unit
def test_the_readme_block_words_every_number_from_the_file():
    built = {"method": hosts.METHOD, "large_batch": 512, "kinds": {KIND: {
        "studies": ["reference/a", "reference/b"],
        "classes": {name: {"sd": sd, "sd_ratio": float(np.exp(sd)), "df": 2, "configurations": 1, "cells": 2,
                           "studies": 2, "processes": 6}
                    for name, sd in zip(hosts.CLASSES, (0.0, 0.02, float("nan"), 0.01, 0.2))},
        "pairs": [{"stored": "reference/a", "study": "reference/b",
                   "counts": {"reproduced": 3, "differs": 0, "inconclusive": 1},
                   "without_host_effect": {"reproduced": 3, "differs": 1, "inconclusive": 0}}],
        "leave_one_out": {"judged": 8, "changed": 1, "by_study": {
            "reference/a": {"judged": 4, "changed": 0, "changes": []},
            "reference/b": {"judged": 4, "changed": 1, "changes": [
                {"pair": ["reference/a", "reference/b"], "configuration": ["static", "bf16", 512, "default", "module"],
                 "with_it": "inconclusive: hosts differ too much here", "without_it": "differs (slower)"}]}}},
        "spread": []}}}
    text = host_effect.block(built)
    assert "| device-bound | ±22% | 1 | 2 | 6 | 2 |" in text
    assert "| compiled waits on the host | not estimated |" in text and "| eager against eager | ±0% |" in text
    assert "| 3 reproduced, 0 differ, 1 inconclusive | 3 reproduced, 1 differ, 0 inconclusive |" in text
    assert "**1 of 8 verdicts change** (`reference/a` 0 of 4; `reference/b` 1 of 4)" in text
    assert "static bf16 512 default module: inconclusive: hosts differ too much here with it" in text
