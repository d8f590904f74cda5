import json

import numpy as np
import pandas as pd
import pytest

from compile_study import report
from compile_study.summary import load_records, summarize


def record(tmp_path, mode, bs, repeat, step_ms, status="ok", error=None):
    rec = {
        "config": {"compile_mode": mode, "batch_size": bs, "shape_regime": "static", "precision": "bf16", "repeat": repeat},
        "env": {"device_type": "cuda", "device_name": "GPU_X & co", "torch": "2.11.0", "python": "3.12",
                "inductor_cache": "cold" if repeat == 0 else "warm"},
        "status": status,
        "error": error,
        "metrics": {} if status != "ok" else {
            "steady_step_ms": step_ms, "warmup_excess_s": (1.0 if mode == "eager" else 13.5 if repeat == 0 else 4.0 + repeat), "epoch1_s": 20.0, "epoch2_s": 8.0,
            "eval_accuracy": 0.8, "peak_memory_bytes": 2**30, "samples_per_s": 1000.0 * bs / step_ms,
        },
    }
    path = tmp_path / f"{mode}-{bs}-{repeat}.json"
    path.write_text(json.dumps(rec))
    return path


@pytest.fixture
def records(tmp_path):
    paths = [record(tmp_path, "eager", 64, r, ms) for r, ms in enumerate([10.0, 10.2, 9.8])]
    paths += [record(tmp_path, "default", 64, r, ms) for r, ms in enumerate([8.0, 8.1, 7.9])]
    paths += [record(tmp_path, "eager", 4096, 0, 99.0)]
    paths += [record(tmp_path, "default", 4096, 0, None, "oom", "OutOfMemoryError: CUDA out of memory")]
    return load_records(paths)


def test_speedup_is_ratio_of_median_step_times_with_a_bootstrap_interval(records):
    s = summarize(records).set_index(["compile_mode", "batch_size"])
    row = s.loc[("default", 64)]
    assert row.speedup == pytest.approx(10.0 / 8.0)
    assert row.speedup_ci_low <= row.speedup <= row.speedup_ci_high
    assert row.speedup_ci_low == pytest.approx(9.8 / 8.1, rel=0.02) and row.n_ok == 3
    assert s.loc[("eager", 64)].speedup == pytest.approx(1.0)
    assert row.cold_compile_s == 12.5 and row.warm_compile_s == pytest.approx(4.5)  # median of 4.0, 5.0


def test_failed_configuration_is_a_status_not_a_number(records):
    s = summarize(records).set_index(["compile_mode", "batch_size"])
    row = s.loc[("default", 4096)]
    assert row.status == "oom" and np.isnan(row.speedup) and "out of memory" in row.error


def test_paper_table_holds_the_summary_numbers_and_failed_cells(records, tmp_path):
    summary = summarize(records)
    facts = {"description": "AG News test split (7,600 rows)", "source": "csv", "notes": [], "vocab_size": 100,
             "max_len": 128, "splits": {s: {"rows": 10, "pad_fraction_at_max_len": 0.58,
                                            "token_length_percentiles": {"p50": 1, "p90": 2, "p99": 3, "max": 4}}
                                        for s in ("train", "eval")}}
    env = {"device_name": "GPU_X & co", "torch": "2.11.0", "triton": "3.6.0", "cuda": "13.0", "driver": "580",
           "python": "3.12", "cpu_model": "cpu", "cpu_cores": "16", "git_commit": "abc", "git_dirty": "False",
           "n_records": 8, "statuses": {"ok": 7, "oom": 1}}
    config = {"model": {"n_layers": 4, "n_heads": 4, "d_model": 256, "d_ff": 1024, "dropout": 0.1, "max_len": 128},
              "train": {"lr": 3e-4}}
    grid = {"warmup_steps": 5, "timed_steps": 100, "repeats": 3, "max_epoch_steps": None}
    text = report.render(report_template(), summary, env, facts,
                         dict(config=config, grid=grid, device="cuda", figure="figures/speedup.png"))
    assert "| static | bf16 | 64 | default | 3/3 | 8.00 | 10.00 | 1.25× |" in text
    assert "| 12.5 | 4.5 |" in text  # cold and warm compile
    assert "OOM at batch 4096" in text
    assert "GPU\\_X \\& co" in text and "GPU_X & co" not in text  # escaped for Markdown
    assert "AG News test split (7,600 rows)" in text and "A GPU run" in text


def report_template():
    from pathlib import Path

    return Path(__file__).resolve().parents[1] / "paper" / "templates" / "paper.md.j2"


@pytest.mark.parametrize("hostile", ["a_b & c % d $ e # f { g } h \\ i ^ j ~ k", "<script>|x|</script>\n# heading"])
def test_escaping_neutralises_hostile_strings(hostile):
    md = report.md_escape(hostile)
    assert "\n" not in md and "|" not in md.replace("\\|", "")
    assert "<" not in md.replace("\\<", "") and "_" not in md.replace("\\_", "")
    tex = report.tex_escape(hostile)
    for ch, esc in [("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"), ("_", r"\_")]:
        assert tex.count(esc) == hostile.count(ch)
    assert r"\textbackslash{}" in tex or "\\" not in hostile
