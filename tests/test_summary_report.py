import json

import numpy as np
import pandas as pd
import pytest

from compile_study import report
from compile_study.summary import add_mfu, load_records, summarize, verdict

from .conftest import REPO


def record(tmp_path, mode, bs, repeat, step_ms, ref_ms=10.0, status="ok", error=None, regime="static"):
    rec = {
        "config": {"compile_mode": mode, "batch_size": bs, "shape_regime": regime, "precision": "bf16", "repeat": repeat},
        "env": {"device_type": "cuda", "device_name": "GPU_X & co", "torch": "2.11.0", "python": "3.12",
                "inductor_cache": "cold" if repeat == 0 else "warm"},
        "status": status,
        "error": error,
        "metrics": {} if status != "ok" else {
            "steady_step_ms": step_ms, "reference_step_ms": ref_ms, "in_process_speedup": ref_ms / step_ms,
            "step_times_ms": [step_ms * 0.99, step_ms, step_ms * 1.01],
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
    return load_records(paths)


def test_speedup_is_the_median_in_process_ratio_with_a_bootstrap_interval(records):
    s = summarize(records).set_index(["compile_mode", "batch_size"])
    row = s.loc[("default", 64)]
    assert row.speedup == pytest.approx(10.0 / 8.0)
    assert row.speedup_ci_low <= row.speedup <= row.speedup_ci_high
    assert row.speedup_ci_low == pytest.approx(10.0 / 8.1, rel=1e-6) and row.n_ok == 3
    assert row.cross_process_speedup == pytest.approx(10.0 / 8.0)


def test_aa_control_labels_speedups_inside_the_noise(records):
    s = summarize(records).set_index(["compile_mode", "batch_size"])
    assert s.loc[("eager", 64)].aa_band == pytest.approx(10.2 / 10.0, rel=1e-6)  # worst eager ratio: 10.0/10.2
    assert s.loc[("default", 64)].verdict == "faster"
    assert s.loc[("reduce-overhead", 64)].verdict == "no measurable difference"
    assert verdict(0.90, 0.95, 0.93, 1.02) == "slower"


def test_compile_latency_break_even_and_memory(records):
    row = summarize(records).set_index(["compile_mode", "batch_size"]).loc[("default", 64)]
    assert row.cold_compile_s == pytest.approx(12.5) and row.warm_compile_s == pytest.approx(4.5)  # minus eager's 1 s
    assert row.break_even_steps == pytest.approx(12.5 / ((10.0 - 8.0) / 1e3))
    assert row.memory_ratio == pytest.approx(2.0)


def test_failed_configuration_is_a_status_not_a_number(records):
    row = summarize(records).set_index(["compile_mode", "batch_size"]).loc[("default", 4096)]
    assert row.status == "oom" and np.isnan(row.speedup) and "out of memory" in row.error


def test_paper_holds_the_summary_numbers_and_failed_cells(records):
    summary = add_mfu(summarize(records), {"bf16": {"tflops": 800.0}})
    facts = {"description": "AG News test split (7,600 rows)", "source": "csv", "notes": [], "vocab_size": 100,
             "max_len": 128, "splits": {s: {"rows": 10, "pad_fraction_at_max_len": 0.58,
                                            "token_length_percentiles": {"p50": 1, "p90": 2, "p99": 3, "max": 4}}
                                        for s in ("train", "eval")}}
    env = {"device_name": "GPU_X & co", "torch": "2.11.0", "triton": "3.6.0", "cuda": "13.0", "driver": "580",
           "python": "3.12", "cpu_model": "cpu", "cpu_cores": "16", "git_commit": "abc", "git_dirty": "False",
           "n_records": 11, "statuses": {"ok": 10, "oom": 1}, "peak_tflops": {"bf16": 800.0}}
    config = {"model": {"n_layers": 4, "n_heads": 4, "d_model": 256, "d_ff": 1024, "dropout": 0.1, "max_len": 128},
              "train": {"lr": 3e-4}}
    grids = [{"name": "modes", "compile_mode": ["eager"], "batch_size": [64], "shape_regime": ["static"],
              "precision": ["bf16"], "repeats": 3, "warmup_steps": 5, "timed_steps": 100, "interleave_chunk": 10,
              "recompile_limit": 8, "max_epoch_steps": None}]
    parity = pd.DataFrame([{"compile_mode": "default", "precision": "bf16", "batch_size": 64, "loss_steps": 20,
                            "train_steps": 106, "max_rel_loss_diff": 0.004, "loss_rtol": 0.05, "loss_ok": True,
                            "eager_accuracy": 0.81, "compiled_accuracy": 0.795, "accuracy_delta_points": -1.5,
                            "accuracy_ok": False}])
    text = report.render(REPO / "paper" / "templates" / "paper.md.j2", summary, parity, env, facts,
                         dict(config=config, grids=grids, device="cuda", figures="figures"))
    assert "| bf16 | 64 | default | 3/3 | 8.00 | 10.00 | 1.25× | [1.23, 1.27] | faster | 1.25× | 12.5 | 4.5 | 6,250 | 2.00 | 12.5% |" in text
    assert "| bf16 | 64 | reduce-overhead | 3/3 | 10.00 | 10.00 | 1.00× |" in text and "no measurable difference" in text
    assert "OOM at batch 4096" in text
    assert "| default | bf16 | 64 | 20 | 4.0e-03 | 5e-02 | pass | 106 | 81.0% | 79.5% | -1.5 | FAIL |" in text
    assert "GPU\\_X \\& co" in text and "GPU_X & co" not in text  # escaped for Markdown
    assert "AG News test split (7,600 rows)" in text and "A GPU run" in text


@pytest.mark.parametrize("hostile", ["a_b & c % d $ e # f { g } h \\ i ^ j ~ k", "<script>|x|</script>\n# heading"])
def test_escaping_neutralises_hostile_strings(hostile):
    md = report.md_escape(hostile)
    assert "\n" not in md and "|" not in md.replace("\\|", "")
    assert "<" not in md.replace("\\<", "") and "_" not in md.replace("\\_", "")
    tex = report.tex_escape(hostile)
    for ch, esc in [("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"), ("_", r"\_")]:
        assert tex.count(esc) == hostile.count(ch)
    assert r"\textbackslash{}" in tex or "\\" not in hostile


def test_hostile_strings_cannot_break_the_rendered_paper(tmp_path):
    hostile = "GPU_|x| & 100% $5 #1 {a} \\b ^c ~d <script>\n# injected heading"
    paths = [record(tmp_path, "eager", 64, 0, 10.0), record(tmp_path, "default", 64, 0, 8.0)]
    paths += [record(tmp_path, "default", 128, 0, None, status="oom", error=f"OutOfMemoryError: {hostile}")]
    for p in paths:
        rec = json.loads(p.read_text())
        rec["env"]["device_name"] = hostile
        p.write_text(json.dumps(rec))
    summary = add_mfu(summarize(load_records(paths)), {"bf16": {"tflops": 800.0}})
    facts = {"description": hostile, "source": "csv", "notes": [hostile], "vocab_size": 100, "max_len": 128,
             "splits": {s: {"rows": 10, "pad_fraction_at_max_len": 0.5,
                            "token_length_percentiles": {"p50": 1, "p90": 2, "p99": 3, "max": 4}} for s in ("train", "eval")}}
    env = {"device_name": hostile, "torch": "2.11", "triton": "3.6", "cuda": "13.0", "driver": hostile, "python": "3.12",
           "cpu_model": hostile, "cpu_cores": "16", "git_commit": hostile, "git_dirty": "False", "n_records": 3,
           "statuses": {"ok": 2, "oom": 1}, "peak_tflops": {"bf16": 800.0}}
    grids = [{"name": hostile, "compile_mode": ["eager"], "batch_size": [64], "shape_regime": ["static"],
              "precision": ["bf16"], "repeats": 1, "warmup_steps": 5, "timed_steps": 50, "interleave_chunk": 10,
              "recompile_limit": 8, "max_epoch_steps": None}]
    config = {"model": {"n_layers": 4, "n_heads": 4, "d_model": 256, "d_ff": 1024, "dropout": 0.1, "max_len": 128},
              "train": {"lr": 3e-4}}
    text = report.render(REPO / "paper" / "templates" / "paper.md.j2", summary, pd.DataFrame(), env, facts,
                         dict(config=config, grids=grids, device="cuda", figures="figures"))
    assert "<script>" not in text and "\n# injected heading" not in text
    assert "GPU\\_\\|x\\| \\& 100\\% \\$5 \\#1 \\{a\\} \\\\b \\^c \\~d \\<script\\>" in text
    for line in text.splitlines():  # every table row keeps its column count
        if line.startswith("| bf16 | 64 |"):
            assert line.replace("\\|", "").count("|") == 19
