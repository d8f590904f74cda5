"""The claims table: each verdict follows its documented rule from the measured numbers."""

import numpy as np
import pandas as pd

from compile_study import claims

FACTS = {"splits": {"train": {"rows": 6840}}}


def row(mode, bs, speedup, *, regime="static", scope="module", precision="bf16", **kw):
    base = dict(compile_mode=mode, batch_size=bs, speedup=speedup, shape_regime=regime, compile_scope=scope,
                precision=precision, status="ok", verdict="faster" if speedup > 1.05 else "no measurable difference",
                inference_speedup=np.nan, forward_speedup=np.nan, backward_speedup=np.nan, break_even_steps=np.nan,
                graphs_compiled=1, distinct_shapes=1, recompile_limit_hit=False, eager_fallback_steps=0,
                gain_over_eager_static=np.nan)
    return base | kw


def table(*rows):
    return pd.DataFrame(list(rows))


def test_training_claim_holds_only_when_every_default_speedup_is_within_20_to_40_percent():
    inside = table(row("default", 32, 1.25), row("default", 512, 1.38), row("reduce-overhead", 32, 3.1))
    assert claims.training_claim(inside)["verdict"] == "holds"
    mixed = table(row("default", 32, 1.25), row("default", 512, 1.6))
    c = claims.training_claim(mixed)
    assert c["verdict"] == "depends (within 1.2–1.4× in 1 of 2)" and "1.25–1.60×" in c["evidence"]
    assert claims.training_claim(table(row("default", 32, 1.05)))["verdict"] == "does not hold"
    assert claims.training_claim(table(row("eager", 32, 1.0)))["verdict"] == claims.NOT_MEASURED


def test_inference_claim_takes_the_best_default_mode_configuration():
    s = table(row("default", 32, 1.3, inference_speedup=1.45), row("default", 512, 1.4, inference_speedup=1.62))
    c = claims.inference_claim(s)
    assert c["verdict"] == "holds" and "best 1.62× at batch 512" in c["evidence"]
    s.loc[1, "inference_speedup"] = 1.3
    assert claims.inference_claim(s)["verdict"] == "partly"


def test_mlp_claim_is_judged_on_the_synchronised_speedup_at_batch_64():
    mlp = {"rows": [{"batch_size": 64, "status": "ok", "warm_ratio": 1.4, "cold_ratio": 0.1, "proper_speedup": 0.6,
                     "proper_eager_ms": 0.8, "proper_compiled_ms": 1.33}]}
    c = claims.mlp_claim(mlp)
    assert c["verdict"] == "does not hold" and "timeit unsynchronised 1.40×" in c["evidence"]
    mlp["rows"][0]["proper_speedup"] = 1.3
    assert claims.mlp_claim(mlp)["verdict"] == "holds"
    assert claims.mlp_claim({"rows": []})["verdict"] == claims.NOT_MEASURED


def test_dynamic_claim_separates_automatic_dynamic_from_per_shape_recompiles():
    s = table(
        row("default", 256, 1.2, regime="static"),
        row("default", 256, 1.22, regime="dynamic", graphs_compiled=3, distinct_shapes=20),
        row("default", 256, 1.0, regime="dynamic-false", graphs_compiled=8, distinct_shapes=20,
            recompile_limit_hit=True, eager_fallback_steps=140),
    )
    c = claims.dynamic_claim(s)
    assert c["verdict"] == "depends (holds for dynamic-false)"
    assert "3 graphs for 20 shapes, 1.22× over eager (static: 1.20×)" in c["evidence"]
    assert "recompile limit hit (140 eager steps)" in c["evidence"]
    assert claims.dynamic_claim(s.iloc[:2])["verdict"] == "does not hold"


def test_forward_only_claim_compares_the_phase_speedups():
    s = table(row("default", 32, 1.3, forward_speedup=1.3, backward_speedup=1.36),
              row("default", 32, 0.28, scope="forward"), row("default", 512, 1.4, forward_speedup=1.08,
                                                              backward_speedup=1.89))
    c = claims.forward_only_claim(s)
    assert c["verdict"] == "does not hold" and "forward 0.28×" in c["evidence"]


def test_break_even_claim_states_steps_and_epochs():
    s = table(row("default", 64, 1.25, break_even_steps=8000.0), row("default", 512, 1.0, break_even_steps=np.inf))
    c = claims.break_even_claim(s, FACTS)
    assert "8,000–8,000 steps" in c["evidence"] and "74.9–74.9 epochs" in c["evidence"] and "never in 1" in c["evidence"]


def test_claims_table_has_one_row_per_claim_even_with_nothing_measured():
    t = claims.claims_table(table(row("eager", 32, 1.0)), None, FACTS)
    assert len(t) == 6 and set(t.verdict) == {claims.NOT_MEASURED}
