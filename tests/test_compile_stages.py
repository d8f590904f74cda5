"""Where a compile's seconds go (core/compile_stages.py): the stage arithmetic on hand-made compilation metrics, and
a real cold compile on the CPU whose stages sum to its measured latency."""

from __future__ import annotations

import json
import threading

import pytest

from compile_study.core import compile_record, compile_stages
from compile_study.core.compile_stages import STAGES, split

from .conftest import TINY_MODEL

US = 1_000_000


def frame(dynamo, aot, inductor, code_gen, kernels, tune=0.0, passes=0.0) -> dict:
    """A forward frame's entry, seconds in (microseconds out, as torch keeps them)."""
    return {"is_runtime": False, "duration_us": dynamo * US, "dynamo_cumulative_compile_time_us": dynamo * US,
            "aot_autograd_cumulative_compile_time_us": aot * US, "inductor_cumulative_compile_time_us": inductor * US,
            "inductor_code_gen_cumulative_compile_time_us": code_gen * US, "triton_compile_time_us": kernels * US,
            "compile_time_autotune_time_us": tune * US, "pre_grad_pass_time_us": passes / 2 * US,
            "joint_graph_pass_time_us": passes / 2 * US, "backward_cumulative_compile_time_us": None}


def backward(total, inductor, kernels) -> dict:
    return {"is_runtime": False, "duration_us": total * US, "backward_cumulative_compile_time_us": total * US,
            "dynamo_cumulative_compile_time_us": None, "inductor_cumulative_compile_time_us": inductor * US,
            "triton_compile_time_us": kernels * US}


def runtime(total, recording, tune) -> dict:
    return {"is_runtime": True, "duration_us": total * US, "runtime_cudagraphify_time_us": recording * US,
            "runtime_triton_autotune_time_us": tune * US}


@pytest.mark.unit
def test_a_cold_compiles_stages_are_its_columns_less_what_nests_inside_them_and_sum_to_its_outer_times():
    entries = [frame(dynamo=20, aot=18, inductor=15, code_gen=12, kernels=8, tune=2, passes=1),
               backward(total=9, inductor=8, kernels=5), runtime(total=3, recording=2.5, tune=1)]
    got = split(entries, {"cpp_compile": 0.0, "cache_load": 0.0})
    s = got["stages"]
    assert s["dynamo"] == pytest.approx(2)  # 20 - 18
    assert s["aot_autograd"] == pytest.approx(18 + 9 - 23 - 1)  # both AOT times less Inductor's and its passes
    assert s["inductor"] == pytest.approx(23 + 1 - 13 - 2)  # Inductor with its passes, less kernels and the search
    assert s["kernel_compile"] == pytest.approx(13) and s["autotune"] == pytest.approx(2 + 1)
    assert s["cudagraph"] == pytest.approx(2)  # the runtime entry's 3 s less its first-call tune: no double count
    assert s["cache_load"] == 0
    assert set(s) == set(STAGES) and sum(s.values()) == pytest.approx(20 + 9 + 3)  # = the outer events' seconds
    assert got["accounted_s"] == pytest.approx(32) and got["entries"] == 3


@pytest.mark.unit
def test_cpp_compiles_are_taken_from_inductor_first_and_the_rest_from_the_cache_loads():
    # a portable start on the CPU: the AOTAutograd cache's loads (6 s) compile the C++ kernels (4 s in all) again
    warm = [frame(dynamo=8, aot=7, inductor=0.5, code_gen=0.4, kernels=0)]
    s = split(warm, {"cpp_compile": 4.0, "cache_load": 6.0})["stages"]
    assert s["kernel_compile"] == pytest.approx(4) and s["inductor"] == 0
    assert s["cache_load"] == pytest.approx(6 - 3.5) and s["aot_autograd"] == pytest.approx(7 - 0.5 - 6)
    assert sum(s.values()) == pytest.approx(8)
    # the same where the compile workers' wait lies inside the loads too (measured: a CPU portable start, 2 threads)
    waits = split([frame(dynamo=10, aot=9.5, inductor=0, code_gen=0, kernels=5)], {"cpp_compile": 2.0,
                                                                                  "cache_load": 8.0})["stages"]
    assert waits["kernel_compile"] == pytest.approx(7) and waits["cache_load"] == pytest.approx(1)
    assert waits["aot_autograd"] == pytest.approx(1.5) and sum(waits.values()) == pytest.approx(10)
    # a compile from scratch: the C++ compiles lie inside Inductor's code generation
    cold = split([frame(dynamo=10, aot=9, inductor=8, code_gen=7, kernels=2)], {"cpp_compile": 3.0})["stages"]
    assert cold["inductor"] == pytest.approx(3) and cold["kernel_compile"] == pytest.approx(5)
    assert cold["cache_load"] == 0 and sum(cold.values()) == pytest.approx(10)


@pytest.mark.unit
def test_missing_or_none_fields_count_nothing_and_a_torch_without_the_columns_measured_nothing():
    sparse = [{"is_runtime": False, "duration_us": 5 * US, "dynamo_cumulative_compile_time_us": 5 * US,
               "aot_autograd_cumulative_compile_time_us": None}]
    assert split(sparse, {})["stages"]["dynamo"] == pytest.approx(5)
    assert split([{"duration_us": 5 * US, "entire_frame_compile_time_s": 5}], {}) is None  # an older torch's entry
    nothing = split([], {})  # an eager run: nothing compiled, truly zero seconds
    assert nothing["entries"] == 0 and sum(nothing["stages"].values()) == 0
    assert compile_stages.measured(None, 12.0) == {"compile_stages_s": None, "compile_rest_s": None}
    m = compile_stages.measured(split(sparse, {}), 6.0)
    assert m["compile_stages_s"] == pytest.approx(5) and m["compile_rest_s"] == pytest.approx(1)


@pytest.mark.unit
def test_a_record_made_before_the_stages_reads_as_not_measured_never_zero(tmp_path):
    from compile_study.core.record import RunConfig

    cfg = RunConfig(compile_mode="default", batch_size=8, shape_regime="static", precision="fp32", repeat=0)
    rec = compile_record.new(cfg, dict(TINY_MODEL), {"device_type": "cpu"}, {"index": 0})
    rec["schema_version"] = 6  # a stored study's record: no compile_stages at all
    rec["metrics"] = {"cold_compile_s": 40.0}
    (tmp_path / "c0.json").write_text(json.dumps(rec))
    row = compile_record.table([tmp_path / "c0.json"]).iloc[0]
    assert all(row[f"stage_{name}_s"] is None for name in STAGES)
    assert row["compile_stages_s"] is None and row["compile_rest_s"] is None


@pytest.mark.unit
def test_only_the_watched_threads_cpp_compiles_count():
    from compile_study.measure.compile_stats import OwnThread

    seconds = OwnThread([1.0])
    seconds.append(2.0)
    worker = threading.Thread(target=seconds.append, args=(5.0,))  # a compile worker: its parent waits for it
    worker.start()
    worker.join()
    assert list(seconds) == [1.0, 2.0, 5.0] and seconds.own == [2.0]


@pytest.mark.compile  # a real cold compile on the CPU
def test_a_cold_compiles_stages_sum_to_its_measured_latency_and_state_the_rest(synthetic_data):
    import torch
    from torch._inductor.utils import fresh_cache

    from compile_study.core.calls.clock import Clock
    from compile_study.measure import cold

    from .test_train import tiny_model_cfg, tiny_run

    with fresh_cache():  # cold: an Inductor cache of its own, empty
        m, _ = cold.measure(tiny_model_cfg(synthetic_data), tiny_run(compile_mode="default"), synthetic_data,
                            torch.device("cpu"), Clock())
    stages = m["compile_stages"]["stages"]
    assert set(stages) == set(STAGES) and all(v >= 0 for v in stages.values())
    assert stages["dynamo"] > 0 and stages["aot_autograd"] > 0 and stages["inductor"] > 0
    assert stages["kernel_compile"] > 0 and stages["cudagraph"] == 0 and stages["cache_load"] == 0  # C++, no graphs
    assert m["compile_stages_s"] == pytest.approx(sum(stages.values()))
    assert m["compile_stages_s"] == pytest.approx(m["cold_compile_s"], rel=0.10)
    assert m["compile_rest_s"] == pytest.approx(m["cold_compile_s"] - m["compile_stages_s"])
    assert m["compile_stages"]["entries"] >= 2  # the frame and its lazily compiled backward


@pytest.mark.gpu
def test_a_cold_compiles_stages_on_cuda_sum_to_its_measured_latency(synthetic_data):
    import torch
    from torch._inductor.utils import fresh_cache

    from compile_study.core.calls.clock import Clock
    from compile_study.measure import cold

    from .test_train import tiny_model_cfg, tiny_run

    with fresh_cache():
        m, _ = cold.measure(tiny_model_cfg(synthetic_data), tiny_run(compile_mode="reduce-overhead"), synthetic_data,
                            torch.device("cuda"), Clock())
    stages = m["compile_stages"]["stages"]
    assert stages["kernel_compile"] > 0 and stages["cudagraph"] > 0  # Triton kernels, CUDA graphs recorded
    assert m["compile_stages_s"] == pytest.approx(m["cold_compile_s"], rel=0.10)
    assert m["compile_rest_s"] == pytest.approx(m["cold_compile_s"] - m["compile_stages_s"])


def _compiles(mode: str, per_stage: list[dict], start: str = "cold") -> list[dict]:
    """Hand-made rows of compile_record.table: one per process, its stage seconds given."""
    rows = []
    for seconds in per_stage:
        stages = dict.fromkeys(STAGES, 0.0) | seconds
        row = {"shape_regime": "static", "precision": "fp32", "compile_mode": mode, "compile_scope": "module",
               "batch_size": 8, "status": "ok", "start": start, "compile_stages_s": sum(stages.values()),
               "record_dir": "x"}
        row |= {f"stage_{k}_s": v for k, v in stages.items()}
        row |= {"compile_rest_s": 1.0, "cold_compile_s": sum(stages.values()) + 1.0}
        rows.append(row)
    return rows


@pytest.mark.unit
def test_the_stage_summary_gives_each_stage_a_mean_interval_and_names_a_modes_stage_only_where_all_agree():
    import pandas as pd

    from compile_study.aggregate import stages as agg

    cold = [{"kernel_compile": k, "inductor": 5.0, "dynamo": 1.0} for k in (20.0, 22.0, 24.0)]
    portable = [{"cache_load": 2.0, "dynamo": 1.0}] * 3
    other = [{"inductor": 9.0, "kernel_compile": 3.0}] * 3  # another mode, led by Inductor
    compiles = pd.DataFrame(_compiles("default", cold) + _compiles("default", portable, "portable")
                            + _compiles("max-autotune-no-cudagraphs", other))
    records = pd.DataFrame({"status": ["ok"], "compile_mode": ["default"], "inductor_cache": ["warm"],
                            "compile_stages_s": [None], "compile_rest_s": [None]})  # no stages: no warm row
    got = agg.summary(compiles, records)
    assert got["measured"] is True and [r["way"] for r in got["rows"]] == ["cold", "portable", "cold"]
    k = got["rows"][0]["stages"]["kernel_compile"]
    assert k["point"] == pytest.approx(22) and k["low"] < 22 < k["high"] and k["n"] == 3
    assert got["rows"][0]["stages"]["cudagraph"] == {"point": 0.0, "low": 0.0, "high": 0.0, "n": 3}  # measured zero
    assert got["rows"][1]["stages"]["cache_load"]["point"] == pytest.approx(2)
    assert got["rows"][0]["latency"]["point"] == pytest.approx(22 + 5 + 1 + 1)  # stages and the rest
    modes = got["modes"]
    assert modes["default"]["code"] == "agree" and modes["default"]["stage"] == "kernel_compile"
    assert modes["default"]["share"][0] == pytest.approx(22 / 28)
    assert modes["max-autotune-no-cudagraphs"]["stage"] == "inductor"
    # the portable starts' stages all equal (no spread): intervals of a point, below the cold compiles' where lower
    assert got["skipped"] == {"portable": {"stages": ["inductor", "kernel_compile"], "configurations": 1,
                                           "few_runs": 0}}
    mixed = pd.DataFrame(_compiles("default", [{"dynamo": 5.0}]) + [
        r | {"batch_size": 32} for r in _compiles("default", [{"inductor": 5.0}])])
    assert agg.leading(agg.stage_rows(mixed, records))["default"] == {
        "stages": ["dynamo", "inductor"], "shares": [1.0, 1.0], "code": "mixed", "stage": None, "share": [1.0, 1.0],
        "configurations": 2}


@pytest.mark.unit
def test_a_study_whose_records_predate_the_stages_says_they_were_not_measured():
    from compile_study.aggregate import stages as agg
    from compile_study.core import record
    from compile_study.core.layout import Layout

    from .conftest import REPO

    study = REPO / "reference" / "h200-quick-2026-12-03"  # stored before the stages, and kept so
    layout = Layout(str(study))
    compiles = compile_record.table(layout.stored_compiles())
    records = record.table(sorted(study.glob("runs/**/r*.json")))
    assert agg.summary(compiles, records) == {"measured": False}
    assert compiles[[f"stage_{s}_s" for s in STAGES]].isna().all().all()  # None, not zero


@pytest.mark.unit
def test_the_stages_figure_is_drawn_only_where_the_stages_were_measured(tmp_path):
    import pandas as pd

    from compile_study.aggregate import stages as agg
    from compile_study.aggregate.figures import cost_figures, figures
    from compile_study.core import digits

    cold = [{"kernel_compile": k, "inductor": 5.0} for k in (20.0, 22.0, 24.0)]
    compiles = pd.DataFrame(_compiles("default", cold) + _compiles("default", [{"cache_load": 0.5}], "portable"))
    records = pd.DataFrame({"status": ["ok"], "compile_mode": ["default"], "inductor_cache": ["warm"],
                            "compile_stages_s": [None], "compile_rest_s": [None]})
    environment = json.loads(digits.dumps({"compile_stages": agg.summary(compiles, records)}))  # as stored
    meta = cost_figures.stages_meta(environment)
    assert meta == {"bars": ["default module static fp32 bs8, from an empty cache",
                             "default module static fp32 bs8, from shipped portable artifacts"],
                    "ways": ["cold", "portable"]}
    cost_figures.stages(environment, "t", tmp_path / "stages", meta)
    assert (tmp_path / "stages.png").stat().st_size > 0 and (tmp_path / "stages.pdf").stat().st_size > 0
    from compile_study.core import record

    from .conftest import REPO

    study = REPO / "reference" / "h200-quick-2026-12-03"  # stored before the stages, and kept so
    summary, runs = pd.read_csv(study / "summary.csv"), record.table(sorted(study.glob("runs/**/r*.json")))
    assert "stages" not in figures.drawable(summary, runs, {"compile_stages": {"measured": False}})
    assert "stages" not in figures.drawable(summary, runs)  # an environment from before the stages
    assert figures.drawable(summary, runs, environment)["stages"] == meta


@pytest.mark.unit
def test_the_traces_cost_is_torchs_count_over_the_studys_job_seconds_against_its_budget(tmp_path, monkeypatch):
    import pandas as pd

    from compile_study.aggregate import stages as agg

    monkeypatch.chdir(tmp_path)  # the report folder beside the compile's record (its record_dir, x)
    (tmp_path / "x" / "c0.tlparse").mkdir(parents=True)
    rows = _compiles("default", [{"inductor": 5.0}] * 3)
    rows[0]["trace"] = {"overhead_s": 0.9, "tlparse": "x/c0.tlparse", "trace_bytes": 10}
    rows[1]["trace"] = rows[2]["trace"] = None  # only a configuration's first cold compile keeps one
    compiles = pd.DataFrame(rows).assign(total_s=[40.0, 30.0, 30.0])
    records = pd.DataFrame({"overhead_total_s": [50.0, 50.0]})
    cost = agg.trace_cost(compiles, records)
    assert cost["traces"] == 1 and cost["seconds"] == pytest.approx(0.9) and cost["job_seconds"] == 200
    assert cost["share"] == pytest.approx(0.0045) and cost["code"] == "within" and cost["tlparse"] == 1
    assert cost["files"] == [{"mode": "default", "scope": "module", "regime": "static", "precision": "fp32", "batch": 8,
                              "trace": "compiles/static/fp32/default/module/bs8/c0.torch-trace.log.gz",
                              "tlparse": "compiles/static/fp32/default/module/bs8/c0.tlparse/index.html"}]
    (tmp_path / "x" / "c0.tlparse").rmdir()  # a stored study keeps the trace, not its report: the paper says so
    cost = agg.trace_cost(compiles, records)
    assert cost["tlparse"] == 0 and cost["files"][0]["tlparse"] is None and cost["skipped"] == [agg.NOT_KEPT]
    rows[0]["trace"] = {"overhead_s": 9.0, "tlparse_skipped": "tlparse is not installed"}
    over = agg.trace_cost(pd.DataFrame(rows).assign(total_s=[40.0, 30.0, 30.0]), records)
    assert over["code"] == "over" and over["skipped"] == ["tlparse is not installed"] and over["files"][0]["tlparse"] is None
    assert agg.trace_cost(pd.DataFrame(_compiles("default", [{}])), records) is None  # no trace kept: no cost said


def _measured_environment() -> dict:
    import pandas as pd

    from compile_study.aggregate import stages as agg

    rows = _compiles("default", [{"kernel_compile": k, "inductor": 5.0, "dynamo": 1.0} for k in (20.0, 22.0, 24.0)])
    rows += _compiles("default", [{"cache_load": 2.0, "dynamo": 1.0}] * 3, "portable")
    for r in rows:
        r["trace"] = None
    rows[0]["trace"] = {"overhead_s": 0.4, "tlparse": "x"}
    compiles = pd.DataFrame(rows).assign(total_s=60.0)
    records = pd.DataFrame({"status": ["ok"], "compile_mode": ["default"], "inductor_cache": ["warm"],
                            "compile_stages_s": [None], "compile_rest_s": [None], "overhead_total_s": [100.0]})
    return agg.summary(compiles, records)


@pytest.mark.unit
def test_the_paper_words_each_modes_stage_the_skips_the_cost_and_links_the_traces(tmp_path, monkeypatch):
    from compile_study.report.paper import render

    from .paper_study import build, make_study

    monkeypatch.chdir(tmp_path)
    (tmp_path / "x" / "c0.tlparse").mkdir(parents=True)  # the report beside the record (_measured_environment)
    study = make_study(tmp_path, hostile="h", device="cpu")
    study["environment"] = study["environment"] | {"compile_stages": _measured_environment()}
    md = render(build(study), "md")
    assert "With `default`, most of a cold compile goes to compiling kernels: 79\\% of its stages' seconds." in md
    assert "A portable start spends less than a cold compile on Inductor's lowering and code generation and " \
           "compiling kernels in the one configuration with both." in md
    assert "| 22.0 \\[17.0, 27.0\\] |" in md  # kernels: 20, 22, 24 s -> mean 22, t interval on n = 3
    assert "Writing the one trace cost 0.4 s by PyTorch's own count, 0.087\\% of the study's job seconds, within " \
           "the 3.0\\% allowed." in md
    assert "`compiles/static/fp32/default/module/bs8/c0.torch-trace.log.gz`" in md
    assert "c0.tlparse/index.html" in md and "stages were not measured" not in md
    assert "Stages no process spent time in are left out: AOTAutograd, autotuning." in md  # a CPU records no graphs
    assert "CUDA" not in md
    render(build(study), "tex")  # the LaTeX renders too (escaping: tests/test_latex.py)


@pytest.mark.unit
def test_a_study_without_stages_says_so_and_shows_no_stage_column_or_zero(tmp_path):
    from compile_study.report.paper import render

    from .paper_study import build, make_study

    study = make_study(tmp_path, hostile="h", device="cpu")  # its environment has no compile_stages, as stored ones
    for env in (study["environment"], study["environment"] | {"compile_stages": {"measured": False}}):
        md = render(build(study | {"environment": env}), "md")
        section = md.split("Where a cold start's seconds go", 1)[1].split("\n#", 1)[0]
        assert "The compiler's stages were not measured in this study" in section
        assert "0.0 s" not in section and "|" not in section  # no table, no figure, no number
        assert "Compiler traces" not in md and "TORCH_TRACE" not in md


@pytest.mark.unit
def test_a_kept_trace_is_gzipped_bounded_and_without_tlparse_says_why(tmp_path, monkeypatch):
    import gzip

    from compile_study.measure import trace

    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_bytes(b"".join(b'{"line": %d}\n' % i for i in range(20000)))
    monkeypatch.setattr(trace, "TRACE_MAX_BYTES", 20_000)
    monkeypatch.setattr(trace.shutil, "which", lambda name: None)
    monkeypatch.setattr(trace.sys, "executable", str(tmp_path / "python"))  # no tlparse beside it either
    kept = trace.keep([str(log)], str(tmp_path / "c0.torch-trace.log.gz"), str(tmp_path / "c0.tlparse"))
    lines = gzip.decompress((tmp_path / "c0.torch-trace.log.gz").read_bytes()).splitlines()
    assert kept["trace_truncated"] is True and kept["trace_bytes"] <= 20_000 + 1_000  # gzip's last block
    assert 0 < len(lines) < 20000 and lines[0] == b'{"line": 0}' and lines[-1].endswith(b"}")  # whole lines kept
    assert kept["tlparse"] is None and kept["tlparse_skipped"].startswith("tlparse is not installed")


@pytest.mark.compile  # two real compiles on the CPU: a cold one that saves its artifacts, a portable start
def test_a_portable_starts_stages_sum_to_its_latency_with_its_cache_loads_apart(synthetic_data, tmp_path):
    import torch
    from torch._inductor.utils import fresh_cache

    from compile_study.core.calls.clock import Clock
    from compile_study.measure import cold

    from .test_train import tiny_model_cfg, tiny_run

    model, cfg, cpu = tiny_model_cfg(synthetic_data), tiny_run(compile_mode="default", repeat=2), torch.device("cpu")
    with fresh_cache():
        cold.measure(model, cfg, synthetic_data, cpu, Clock())
        cold.save_artifacts(tmp_path / "artifacts.bin")
    with fresh_cache():  # an empty cache fed the artifacts, as rule portable_start does
        loaded = cold.load_artifacts(tmp_path / "artifacts.bin", Clock())
        m, _ = cold.measure(model, cfg, synthetic_data, cpu, Clock())
    stages = m["compile_stages"]["stages"]
    assert loaded["artifacts_bytes"] > 0 and m["aot_cache_hits"] >= 1 and stages["cache_load"] > 0
    assert m["compile_stages_s"] == pytest.approx(m["cold_compile_s"], rel=0.10)
    assert m["compile_rest_s"] == pytest.approx(m["cold_compile_s"] - m["compile_stages_s"])


@pytest.mark.unit
def test_a_study_reads_no_file_of_a_tlparse_report_as_a_compile_record(tmp_path):
    """tlparse's report sits beside the record (c0.tlparse/) and holds JSON named chromium_events.json and
    compile_directory.json: the globs of a study's compiles and portable starts name the records alone."""
    import glob

    from compile_study.core.layout import Layout

    folder = tmp_path / "compiles/static/fp32/default/module/bs8"
    (folder / "c0.tlparse/payloads").mkdir(parents=True)
    for name in ("c0.json", "p0.json", "c0.tlparse/chromium_events.json", "c0.tlparse/compile_directory.json",
                 "c0.tlparse/payloads/c6293458ce356a5693bdeb0182f3c9b4.txt"):
        (folder / name).write_text("[]")
    layout = Layout(str(tmp_path))
    assert [p.rsplit("/", 1)[1] for p in layout.stored_compiles()] == ["c0.json", "p0.json"]
    assert [p.rsplit("/", 1)[1] for p in glob.glob(layout.compiles_glob, recursive=True)] == ["c0.json"]
    assert [p.rsplit("/", 1)[1] for p in glob.glob(layout.portables_glob, recursive=True)] == ["p0.json"]
