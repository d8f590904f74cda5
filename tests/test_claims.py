"""The claims table: each verdict code follows its documented rule from intervals over three or more
processes; the evidence is numbers and codes, never sentences."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from compile_study.aggregate import claims

pytestmark = pytest.mark.unit

FACTS = {"splits": {"train": {"rows": 6840}}}


def row(mode, bs, speedup, *, low=np.nan, high=np.nan, n=1, regime="static", scope="module", precision="bf16", **kw):
    base = dict(compile_mode=mode, batch_size=bs, speedup=speedup, speedup_low=low, speedup_high=high, speedup_n=n,
                shape_regime=regime, compile_scope=scope, precision=precision, status="ok",
                verdict="faster" if n >= 3 and low > 1.05 else "few-runs" if n < 3 else "indistinct",
                inference_speedup=np.nan, inference_low=np.nan, inference_high=np.nan, inference_n=0,
                forward_speedup=np.nan, backward_speedup=np.nan, break_even_steps=np.nan, reference_step_ms=10.0,
                graphs_compiled=1, distinct_shapes=1, recompile_limit_hit=False, steady_step_ms=10.0,
                cold_compile_s=np.nan, cold_start_s=np.nan, cold_n=1)
    return base | kw


def table(*rows):
    return pd.DataFrame(list(rows))


def three(mode, bs, point, low, high, **kw):
    return row(mode, bs, point, low=low, high=high, n=3, **kw)


def test_training_claim_needs_intervals_inside_or_outside_the_claimed_range():
    inside = table(three("default", 32, 1.3, 1.25, 1.35), three("default", 512, 1.3, 1.22, 1.38))
    assert claims.training_claim(inside)[0] == "holds"
    outside = table(three("default", 512, 1.65, 1.52, 1.80), three("default", 512, 1.15, 1.148, 1.16, precision="fp32"))
    verdict, ev = claims.training_claim(outside)
    assert verdict == "does-not-hold" and [e["code"] for e in ev] == ["outside", "outside"]
    assert ev[0]["low"] == pytest.approx(1.52) and ev[0]["n"] == 3
    mixed = table(three("default", 32, 1.3, 1.25, 1.35), three("default", 512, 1.65, 1.52, 1.80))
    assert claims.training_claim(mixed)[0] == "depends"
    straddles = table(three("default", 32, 1.4, 1.3, 1.5))  # could be inside or outside: not decided
    assert claims.training_claim(straddles)[0] == "not-enough-evidence"
    two = table(row("default", 32, 1.3, n=2))  # n = 2: no interval, so no verdict, whatever the point
    assert claims.training_claim(two)[0] == "not-enough-evidence"
    assert claims.training_claim(table(row("eager", 32, 1.0)))[0] == "not-measured"


def test_inference_measured_by_one_process_per_configuration_is_not_enough_evidence():
    single = table(row("default", 512, 1.4, inference_speedup=1.78, inference_n=1))
    verdict, ev = claims.inference_claim(single)
    assert verdict == "not-enough-evidence" and ev[0]["point"] == pytest.approx(1.78) and ev[0]["n"] == 1
    reaches = table(row("default", 512, 1.4, inference_speedup=1.7, inference_low=1.55, inference_high=1.85,
                        inference_n=3))
    assert claims.inference_claim(reaches)[0] == "holds"
    below = table(row("default", 512, 1.4, inference_speedup=1.3, inference_low=1.2, inference_high=1.4, inference_n=3))
    assert claims.inference_claim(below)[0] == "does-not-hold"


def _mlp(eager, compiled, bs=64):
    return {"batch_size": bs, "status": "ok", "warm_ratio": 0.64, "cold_ratio": 0.13,
            "proper_eager_ms": min(eager), "proper_compiled_ms": min(compiled), "proper_speedup": 0.6,
            "proper_rounds": {"eager_ms": eager, "compiled_ms": compiled}}


def test_mlp_claim_is_judged_on_the_interval_of_its_alternating_rounds_at_batch_64():
    verdict, ev = claims.mlp_claim({"rows": [_mlp([0.645, 0.747, 0.666], [1.114, 1.122, 1.050]),
                                             _mlp([7.09, 7.09, 7.09], [7.07, 7.07, 7.07], bs=8192)]})
    assert verdict == "does-not-hold" and ev[0]["code"] == "outside" and ev[1]["code"] == "other-batch"
    assert ev[0]["high"] < 1.2 and ev[0]["n"] == 3 and ev[0]["timeit_ratio"] == pytest.approx(0.64)
    assert claims.mlp_claim({"rows": [_mlp([1.3, 1.32, 1.31], [1.0, 1.0, 1.0])]})[0] == "holds"
    assert claims.mlp_claim({"rows": []})[0] == "not-measured"


def test_dynamic_claim_is_judged_by_the_rule_on_the_interval_and_quotes_graphs_for_shapes():
    """"Dynamic shapes erase the gain" once read "does not hold" for 1.10x [1.01, 1.21] against eager on the same
    batches, not distinguishable from eager, because 3 graphs served 6 shapes: the gain is judged by the rule."""
    few = table(row("default", 256, 1.0, n=2, regime="dynamic", graphs_compiled=3, distinct_shapes=6,
                    cold_start_s=42.2))
    verdict, ev = claims.dynamic_claim(few)
    assert verdict == "not-enough-evidence" and (ev[0]["graphs"], ev[0]["shapes"]) == (3, 6)
    erased = three("default", 256, 1.10, 1.01, 1.21, regime="dynamic", graphs_compiled=3, distinct_shapes=6,
                   verdict="indistinct", cold_start_s=60.1)
    verdict, ev = claims.dynamic_claim(table(erased))
    assert verdict == "holds" and ev[0]["code"] == "holds" and ev[0]["cold_start_s"] == 60.1  # no gain by the rule
    kept = three("default", 256, 1.5, 1.4, 1.6, regime="dynamic-false", graphs_compiled=8, distinct_shapes=8)
    assert claims.dynamic_claim(table(kept))[0] == "does-not-hold"  # a graph per shape, and still faster


def test_forward_only_claim_rests_on_one_process_and_quotes_the_scopes_beside_it():
    s = table(row("default", 32, 1.24, n=2, forward_speedup=0.85, backward_speedup=1.26),
              three("default", 32, 0.29, 0.19, 0.45, scope="forward", verdict="slower"),
              three("default", 32, 0.82, 0.76, 0.89, scope="aot-eager"))
    verdict, ev = claims.forward_claim(s)
    assert verdict == "not-enough-evidence" and ev[0]["phase_n"] == 1
    assert {x["scope"]: x["verdict"] for x in ev[0]["scopes"]} == {"forward": "slower", "aot-eager": "indistinct"}


def _paying(steps, low, high, **kw):
    """A configuration at batch 32 (213 steps an epoch) whose break-even interval summary.csv gives."""
    return three("reduce-overhead", 32, 3.0, 2.5, 3.6, cold_start_s=13.5, payback="pays-after", break_even_steps=steps,
                 break_even_low=low, break_even_high=high, break_even_method="Bonferroni", break_even_n=3, **kw)


def test_short_runs_claim_reads_the_break_even_interval_against_one_epoch_of_the_rows_used():
    verdict, ev = claims.short_runs_claim(table(_paying(2025.0, 1700.0, 2400.0)), FACTS)
    assert verdict == "holds" and ev[0]["epoch_steps"] == 6840 // 32 and ev[0]["code"] == "more"
    assert (ev[0]["steps_low"], ev[0]["steps_high"]) == (1700.0, 2400.0)  # the summary's, not recomputed
    assert claims.short_runs_claim(table(_paying(60.0, 40.0, 90.0)), FACTS)[0] == "does-not-hold"  # within an epoch
    assert claims.short_runs_claim(table(_paying(250.0, 150.0, 400.0)), FACTS)[0] == "not-enough-evidence"
    # one cold compile: a point and no interval, so it decides nothing
    one = _paying(2025.0, np.nan, np.nan) | {"break_even_method": "1 cold compile, no interval", "break_even_n": 1}
    verdict, ev = claims.short_runs_claim(table(one), FACTS)
    assert verdict == "not-enough-evidence" and ev[0]["code"] == "few-runs"
    # a step not faster than eager's never pays back: compiling costs more on any run
    never = three("default", 32, 0.99, 0.9, 1.08, cold_start_s=13.5, payback="never", break_even_steps=math.inf)
    verdict, ev = claims.short_runs_claim(table(never), FACTS)
    assert verdict == "holds" and ev[0]["never"] and ev[0]["code"] == "more"


def test_claims_table_is_codes_and_numbers_with_one_row_per_claim():
    t = claims.claims_table(table(row("eager", 32, 1.0)), None, FACTS)
    assert list(t.claim) == list(claims.CLAIMS) and list(t.columns) == ["claim", "verdict", "evidence"]
    assert set(t.verdict) <= set(claims.VERDICTS) and set(t.verdict) == {"not-measured"}
    assert all(isinstance(json.loads(e), list) for e in t.evidence)
