import json

import numpy as np
import pytest

from compile_study.aggregate.summary import summarize
from compile_study.core import record as record_mod
from compile_study.report import paper

pytestmark = pytest.mark.unit


def record(tmp_path, mode, bs, repeat, step_ms, ref_ms=10.0, status="ok", error=None, regime="static", cache=None):
    rec = {
        "schema_version": 3,
        "config": {"compile_mode": mode, "batch_size": bs, "shape_regime": regime, "precision": "bf16", "repeat": repeat},
        "env": {"device_type": "cuda", "device_name": "GPU_X & co", "torch": "2.11.0", "python": "3.12",
                "inductor_cache": cache or ("cold" if repeat == 0 else "warm")},
        "status": status,
        "error": error,
        "metrics": {} if status != "ok" else {
            "steady_step_ms": step_ms, "reference_step_ms": ref_ms, "in_process_speedup": ref_ms / step_ms,
            "step_times_ms": [step_ms * 0.99, step_ms, step_ms * 1.01],
            "reference_step_times_ms": [ref_ms * 0.99, ref_ms, ref_ms * 1.01],
            # epoch 1 - epoch 2: eager 1 s (CUDA init); compiled 13.5 s cold, 5 and 6 s warm
            "epoch1_s": 10.0 + (1.0 if mode == "eager" else 13.5 if repeat == 0 else 4.0 + repeat), "epoch2_s": 10.0,
            "eval_accuracy": 0.8, "peak_memory_bytes": 2**30 if mode == "eager" else 2**29,
            "samples_per_s": 1000.0 * bs / step_ms, "achieved_tflops": 100.0,
        },
    }
    path = tmp_path / f"{regime}-{mode}-{bs}-{repeat}.json"
    path.write_text(json.dumps(rec))
    return path


@pytest.fixture
def records(tmp_path):
    paths = [record(tmp_path, "eager", 64, r, ms, ref) for r, (ms, ref) in enumerate([(10.0, 10.1), (10.2, 10.0), (9.8, 9.9)])]
    paths += [record(tmp_path, "default", 64, r, ms, 10.0) for r, ms in enumerate([8.0, 8.1, 7.9])]
    paths += [record(tmp_path, "reduce-overhead", 64, r, ms, 10.0) for r, ms in enumerate([9.95, 10.0, 10.05])]
    paths += [record(tmp_path, "eager", 4096, 0, 99.0, 99.0)]
    paths += [record(tmp_path, "default", 4096, 0, None, status="oom", error="OutOfMemoryError: CUDA out of memory")]
    return record_mod.table(paths)


ROWS = 6840  # the training rows the runs used (facts.json): epochs are counted in them


def test_speedup_is_a_t_interval_on_the_processes_log_ratios(records):
    s = summarize(records, ROWS).set_index(["compile_mode", "batch_size"])
    row = s.loc[("default", 64)]
    ratios = np.array([10.0 / 8.0, 10.0 / 8.1, 10.0 / 7.9])
    assert row.speedup == pytest.approx(np.exp(np.log(ratios).mean()))  # geometric mean over processes
    assert row.speedup_low < min(ratios) and row.speedup_high > max(ratios)  # a t interval, not the min-max range
    assert row.speedup_method == "t on log ratio, n = 3" and row.n_ok == 3
    assert row.cross_process_speedup == pytest.approx(10.0 / 8.0)


def test_aa_control_labels_speedups_inside_the_noise(records):
    s = summarize(records, ROWS).set_index(["compile_mode", "batch_size"])
    eager = s.loc[("eager", 64)]
    assert eager.verdict == "aa" and eager.aa_low < 1 < eager.aa_high and eager.aa_n == 3
    assert s.loc[("default", 64)].verdict == "faster"
    assert s.loc[("reduce-overhead", 64)].verdict in ("within-noise", "indistinct")
    assert s.loc[("eager", 4096)].verdict == "aa" and s.loc[("default", 4096)].status == "oom"


def test_compile_latency_break_even_and_memory(records):
    row = summarize(records, ROWS).set_index(["compile_mode", "batch_size"]).loc[("default", 64)]
    assert row.cold_compile_s == pytest.approx(12.5) and row.warm_compile_s == pytest.approx(4.5)  # minus eager's 1 s
    assert (row.cold_n, row.warm_n) == (1, 2)  # as each run found its Inductor cache directory
    assert row.cold_epoch1_s == pytest.approx(23.5) and row.warm_epoch1_s == pytest.approx(15.5)  # never pooled
    # cold compile over what a step saves, eager's step x (1 - 1 / speedup), from the speedup's geometric mean
    assert row.break_even_steps == pytest.approx(12.5 / (row.reference_step_ms * (1 - 1 / row.speedup) / 1e3))
    assert row.break_even_epochs == pytest.approx(row.break_even_steps / (ROWS // 64))  # epochs of the rows used
    assert row.payback == "pays-after" and np.isnan(row.break_even_low)  # one cold compile: no interval
    assert row.break_even_method == "1 cold compile, no interval" and row.cold_method == "single run"
    assert row.memory_ratio == pytest.approx(2.0)


def test_a_point_shown_beside_an_interval_is_its_centre_and_two_processes_get_none(records):
    s = summarize(records, ROWS).set_index(["compile_mode", "batch_size"])
    row = s.loc[("default", 64)]
    assert row.step_ms == pytest.approx(np.exp(np.log([8.0, 8.1, 7.9]).mean()))  # geometric mean, its interval's
    assert row.step_low < row.step_ms < row.step_high and row.step_n == 3
    two = summarize(records[~((records.compile_mode == "default") & (records.repeat == 2))], ROWS)
    two = two.set_index(["compile_mode", "batch_size"]).loc[("default", 64)]
    assert two.speedup_n == 2 and np.isnan(two.speedup_low) and np.isnan(two.speedup_high)
    assert two.verdict == "few-runs"


def test_failed_configuration_is_a_status_not_a_number(records):
    row = summarize(records, ROWS).set_index(["compile_mode", "batch_size"]).loc[("default", 4096)]
    assert row.status == "oom" and np.isnan(row.speedup) and "out of memory" in row.error


@pytest.mark.parametrize("hostile", ["a_b & c % d $ e # f { g } h \\ i ^ j ~ k", "<script>|x|</script>\n# heading"])
def test_escaping_neutralises_hostile_strings(hostile):
    md = paper.md_escape(hostile)
    assert "\n" not in md and "|" not in md.replace("\\|", "")
    assert "<" not in md.replace("\\<", "") and "_" not in md.replace("\\_", "")
    tex = paper.tex_escape(hostile)
    for ch, esc in [("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"), ("_", r"\_")]:
        assert tex.count(esc) == hostile.count(ch)
    assert r"\textbackslash{}" in tex or "\\" not in hostile


def test_a_configuration_that_started_from_a_shared_gemm_search_is_charged_that_search(tmp_path):
    """`max-autotune-no-cudagraphs` once got a 29-s cold compile and a 5,987-step break-even from a compile that
    started from the GEMM search of `max-autotune`, whose cold compile took 172.6 s: the search is charged too."""
    from compile_study.aggregate.decide import decide
    from compile_study.aggregate.environment import environment
    from compile_study.core import vocab
    from compile_study.report.advice import payback
    from compile_study.report.build import payback_table
    from compile_study.report.document import Text
    from compile_study.report.findings import Context
    from compile_study.report.method import costs

    paths = [record(tmp_path, "eager", 512, r, 10.0, 10.0) for r in range(3)]
    paths += [record(tmp_path, "max-autotune", 512, r, 8.0) for r in range(3)]
    paths += [record(tmp_path, "max-autotune-no-cudagraphs", 512, r, 8.5,
                     cache=vocab.SEARCH_SHARED if r == 0 else None) for r in range(3)]
    records = record_mod.table(paths)
    s = summarize(records, ROWS).set_index("compile_mode")
    shared, searched = s.loc["max-autotune-no-cudagraphs"], s.loc["max-autotune"]
    assert (shared.cold_n, shared.warm_n, shared.search_shared_n) == (1, 2, 1)
    assert shared.cold_compile_s == pytest.approx(12.5)  # its own first epoch, as timed
    assert shared.cold_start_s == pytest.approx(12.5 + 12.5) and shared.cold_search == "max-autotune"  # + the search
    saved = shared.reference_step_ms * (1 - 1 / shared.speedup) / 1e3
    assert shared.break_even_steps == pytest.approx(25.0 / saved)
    assert shared.warm_compile_s == pytest.approx(4.5)  # its warm repeats count as any
    assert (searched.cold_n, searched.search_shared_n) == (1, 0) and searched.cold_start_s == pytest.approx(12.5)

    env = environment(records)
    assert env["compiled_cache_states"] == {"warm": 4, "cold": 1, vocab.SEARCH_SHARED: 1}
    assert env["search_shared_modes"] == ["max-autotune-no-cudagraphs"]
    summary = s.reset_index().assign(mfu=0.5)
    ctx = Context(summary, None, decide(summary), env, {"splits": {"train": {"rows": ROWS}}}, {"grids": {"cuda": []}},
                  "cuda", "figures", [], {})
    facts = costs(ctx)
    assert (facts["cold"], facts["warm"], facts["shared"], facts["shared_modes"]) == (
        1, 4, 1, ["max-autotune-no-cudagraphs"])
    sentence = paper.words(Text("method", "costs", facts))
    assert "`max-autotune-no-cudagraphs`" in sentence and "charged that search too" in sentence
    cold_column = {row[2]: row[4] for row in payback_table(ctx, payback(ctx)).rows}  # after the step's column
    assert cold_column["max-autotune-no-cudagraphs (module)"] == "25.0 s (1 cold compile, no interval)"
    assert cold_column["max-autotune (module)"] == "12.5 s (single run)"
    rule = paper.words(Text("payback", "rule", {"p": payback(ctx), "figure": False, "side": 0.975}))
    assert "is charged the whole cold compile of `max-autotune` (module), whose GEMM search it started from" in rule


def _split_row(mode, scope, batch, speedups, status="ok"):
    from compile_study.aggregate.columns import columns
    from compile_study.core import stats

    return {"shape_regime": "static", "precision": "bf16", "batch_size": batch, "compile_mode": mode,
            "compile_scope": scope, "status": status} | columns("speedup", stats.speedup_interval(speedups))


def test_the_graph_split_divides_the_step_graphs_speedup_by_its_controls_where_both_ran():
    """At batch 32 the step graph (four processes) and its eager control (three) ran: the graph's share is the
    control's own interval, the compiler's the Welch ratio of the two, and they multiply back; at 512 the control
    failed, and at 128 no step graph ran: the split is missing at 512 and absent at 128."""
    import pandas as pd

    from compile_study.aggregate.decide import graph_split
    from compile_study.core import stats

    graph, control = [10.1, 11.2, 9.6, 10.6], [6.3, 6.9, 6.1]
    summary = pd.DataFrame([
        _split_row("eager", "module", 32, [1.0, 1.01, 0.99]), _split_row("default", "step-graph", 32, graph),
        _split_row("eager", "eager-step-graph", 32, control), _split_row("default", "step-graph", 512, [3.0, 3.1, 3.2]),
        _split_row("eager", "eager-step-graph", 512, [], status="oom"),
        _split_row("eager", "eager-step-graph", 128, [2.0, 2.1, 2.2])])
    decided = graph_split(summary)
    (split,) = decided["split"]
    assert split["step_graph"] == {"mode": "default", "scope": "step-graph", "regime": "static", "precision": "bf16",
                                   "batch": 32}
    assert split["control"]["scope"] == "eager-step-graph" and split["control"]["mode"] == "eager"
    want = stats.ratio_interval(graph, control)
    assert (split["compiler"]["point"], split["compiler"]["low"], split["compiler"]["high"]) == pytest.approx(
        (want.point, want.low, want.high))
    assert split["compiler"]["method"] == "Welch t on log ratio, n = 4 and 3" and split["compiler"]["n"] == 3
    assert split["graph"]["point"] == pytest.approx(stats.speedup_interval(control).point)
    assert split["graph"]["method"] == "t on log ratio, n = 3"
    assert split["graph"]["point"] * split["compiler"]["point"] == pytest.approx(split["total"]["point"])
    assert decided["missing"] == [{"mode": "default", "scope": "step-graph", "regime": "static", "precision": "bf16",
                                   "batch": 512}]
