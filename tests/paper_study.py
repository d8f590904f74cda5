"""A small study for the paper's tests: records made by tests.test_summary_report.record, summarised by the
package, every section filled, and hostile strings in every place a data string can reach."""

from __future__ import annotations

import json

import pandas as pd

from compile_study.aggregate.claims import claims_table
from compile_study.aggregate.decide import decide
from compile_study.aggregate.environment import environment
from compile_study.aggregate.figures import figures
from compile_study.aggregate.summary import add_mfu, summarize
from compile_study.core import record as record_mod
from compile_study.report import build as report

from .test_summary_report import record

HOSTILE = "GPU_|x| & 100% $5 #1 {a} \\b ^c ~d <script> `tick` ⟦tab:nothing⟧ /home/someone/secret/data"


def _edit(path, fn):
    rec = json.loads(path.read_text())
    fn(rec)
    path.write_text(json.dumps(rec))
    return path


def _profile(rec, top_name, device="cuda"):
    top = [{"name": top_name, "calls_per_step": 3, "ms_per_step": 0.5, "share": 0.5},
           {"name": "triton_poi_fused_gelu_native_dropout_view_13", "calls_per_step": 2, "ms_per_step": 0.25,
            "share": 0.25}]
    prof = {"kernels_per_step": 120, "idle_fraction": 0.4, "cpu_ms_per_step": 5.0, "device_busy_ms_per_step": 4.0,
            "wall_ms_per_step": 9.0, "triton_kernels_distinct": 7, "distinct_kernels": 20, "top_kernels": top}
    if device == "cpu":  # the CPU profiler has no device time: operators per step and host time only
        top[1]["name"] = "aten::addmm"
        prof |= {"idle_fraction": None, "device_busy_ms_per_step": None, "triton_kernels_distinct": 0,
                 "kernel_kind": "aten ops"}
    if rec["status"] == "ok":
        rec["metrics"] |= {"profile": prof, "reference_profile": prof | {"kernels_per_step": 150}}


def make_study(tmp_path, hostile: str = HOSTILE, device: str = "cuda", peak: float = 800.0) -> dict:
    tmp_path.mkdir(parents=True, exist_ok=True)
    paths = [record(tmp_path, "eager", 32, r, ms, ref) for r, (ms, ref) in enumerate([(10.0, 10.1), (10.2, 10.0), (9.8, 9.9)])]
    paths += [record(tmp_path, "default", 32, r, ms, 10.0) for r, ms in enumerate([8.0, 8.1, 7.9])]
    paths += [record(tmp_path, "reduce-overhead", 32, r, ms, 10.0) for r, ms in enumerate([9.95, 10.0, 10.05])]
    paths += [record(tmp_path, m, 32, 0, ms, 10.0, regime="dynamic") for m, ms in (("eager", 9.0), ("default", 7.0))]
    paths += [record(tmp_path, "eager", 4096, 0, 99.0, 99.0)]
    paths += [record(tmp_path, "default", 4096, 0, None, status="oom", error=f"OutOfMemoryError: {hostile}\n# injected")]
    (tmp_path / "scope").mkdir(exist_ok=True)
    paths.append(_edit(record(tmp_path / "scope", "default", 32, 0, 9.0, 10.0),
                       lambda rec: rec["config"].update(compile_scope="forward")))
    for p in paths:
        _edit(p, lambda rec: (rec["env"].update(device_name=hostile, device_type=device),
                              _profile(rec, f"void at::native::{hostile}_kernel<float, 4>(int)", device)))
    _edit(paths[3], lambda rec: rec["metrics"].update(evidence_errors={"phases": hostile}))
    records = record_mod.table(paths)
    facts = {"description": hostile, "source": "csv", "notes": [hostile], "warnings": [hostile], "vocab_size": 100,
             "max_len": 128, "splits": {s: {"rows": 6840, "pad_fraction_at_max_len": 0.58, "truncated_fraction": 0.0063,
                                            "token_length_percentiles": {"p50": 1, "p90": 2, "p99": 3, "max": 4}}
                                        for s in ("train", "eval")}}
    summary = add_mfu(summarize(records, facts["splits"]["train"]["rows"]), {"bf16": {"tflops": peak}})
    env = environment(records) | {"device_name": hostile, "driver": hostile, "cpu_model": hostile, "cpu_cores": "16",
                                  "peak_tflops": {"bf16": peak}}
    if device == "cpu":
        env |= {"triton": None, "cuda": None, "driver": None}
    grids = [{"name": hostile, "compile_mode": ["eager", "default", "reduce-overhead"], "batch_size": [32, 128, 4096],
              "shape_regime": ["static"], "precision": ["bf16"], "repeats": 3, "warmup_steps": 5, "timed_steps": 100,
              "interleave_chunk": 10, "recompile_limit": 8, "max_epoch_steps": None, "compile_scope": ["module"]}]
    config = {"model": {"n_layers": 4, "n_heads": 4, "d_model": 256, "d_ff": 1024, "dropout": 0.1, "max_len": 128},
              "train": {"lr": 3e-4}, "grids": {device: grids}}
    parity = pd.DataFrame([{"compile_mode": "default", "precision": "bf16", "batch_size": 32, "loss_steps": 20,
                            "train_steps": 106, "max_rel_loss_diff": 0.004, "loss_rtol": 0.05, "loss_ok": True,
                            "eager_accuracy": 0.81, "compiled_accuracy": 0.795, "accuracy_delta_points": -1.5,
                            "accuracy_ok": False}])
    claims = claims_table(summary, None, facts)
    checks = {"timer": [], "drift": []}
    calls = [{"call": 1, "command": ["snakemake", "--cores", "all", "--resources", "timed_run=2"], "exit_status": 0,
              "hostname": hostile, "gpus": [hostile] * 2, "host_cpus": 16}]
    return dict(summary=summary, parity=parity, claims=claims, environment=env, facts=facts, config=config,
                device=device, checks=checks, figure_dir_rel="figures", records=records, calls=calls,
                drawn=figures.drawable(summary, records))


def build(study: dict) -> report.Report:
    """The report of a study as rule paper makes it; its decisions made from its summary and checks as they are
    now (a test may have edited either), as rule summarize makes them."""
    checks = study["checks"]  # the report's names -> the study's files (layout.CHECKS), as rule summarize reads them
    decisions = decide(study["summary"], {"timer_check": {"results": checks.get("timer") or []},
                                          "concurrency": checks.get("concurrency") or {},
                                          "launcher": checks.get("launcher") or {}})
    return report.build(study["summary"], study["parity"], study["claims"], decisions,
                        *(study[k] for k in ("environment", "facts", "config", "device", "checks", "figure_dir_rel",
                                             "calls", "drawn")))
