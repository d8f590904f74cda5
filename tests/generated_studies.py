"""Studies made up by hypothesis, as run records, and their papers made by the real aggregation and rendering.

    @given(generated_studies.studies())
    def test_x(spec):
        study = generated_studies.paper(spec)   # records -> summary, claims, decisions -> report model -> Markdown

A study is drawn as a grid of random shape: a CPU or a GPU, the built-in model or a plugged one (a transformers
config or a factory), one to three batch sizes, one or two precisions, compiled modes (two max-autotune modes share
one GEMM search) and scopes, shape regimes; per configuration a true speedup and spread, its processes (1 to 5,
repeats of one configuration may differ), its cold compiles, and failed or not-applicable runs. Its cold compiles
come from its first runs or from a compile phase (k at once, a GEMM search alone), with or without the
compile-concurrency check; a timer check (with or without eager at the batch it corrects) and parity checks (at
chance or not) beside them. Records are written as a run writes them and read by core/record.py; everything after
that is the study's own code, up to the paper, its figures' index and the study's README.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import strategies as st

from compile_study.aggregate import summary as summary_module
from compile_study.aggregate.claims import claims_table
from compile_study.aggregate.decide import decide
from compile_study.aggregate.environment import environment
from compile_study.aggregate.figures import figures
from compile_study.aggregate.summary import PARITY_COLUMNS, add_mfu, judge_parity, summarize
from compile_study.core import compile_record, record, vocab
from compile_study.report import build as report
from compile_study.report import paper as render
from compile_study.report.docs import readme

ROWS = 6840  # training rows: epochs are counted in them
MODEL = {"n_layers": 4, "n_heads": 4, "d_model": 256, "d_ff": 1024, "dropout": 0.1, "max_len": 128}
PLUGS = {"hf": {"model_type": "bert", "num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2,
                "intermediate_size": 512, "max_position_embeddings": 128},
         "factory": "tests.plug_models:good"}


@dataclass
class Configuration:
    mode: str
    scope: str
    regime: str
    precision: str
    batch: int
    speedup: float  # the true in-process speedup of the configuration's processes
    spread: float  # the SD of their log speedups
    repeats: int
    cold: int  # of the repeats, how many found the Inductor cache empty
    failed: str | None = None  # a status every repeat ends with, or None
    failed_repeats: int = 0  # repeats that failed with `failed`, the others ok
    contended: bool = False  # its cold compiles in a compile phase ran last, among fewer than k as the phase ended


@dataclass
class Spec:
    device: str
    plug: str | None  # None (the built-in model), "hf" or "factory"
    eager_ms: dict  # (precision, batch) -> eager's step in ms
    configurations: list[Configuration] = field(default_factory=list)
    seed: int = 0
    phase: int = 0  # compiles at once in a compile phase (0: none, the first runs compile cold)
    concurrency: tuple = ()  # the compile-concurrency check's per-round ratios, k at once over alone (none: not run)
    concurrency_shape: str = "rounds"  # the check as a stored study has it ("rounds"), or today's ("phase" vs alone)
    portable: int = 0  # portable starts per compiled configuration of a scope one trains with (a compile phase's)
    timer: tuple = ()  # timer check rows: (mode, batch, precision, harness/Timer, eager timed at that batch too)
    accuracy: tuple = ()  # parity checks: (mode, precision, eager accuracy, compiled accuracy)


@st.composite
def studies(draw, device: str | None = None, max_batches: int = 3) -> Spec:
    """A study's plan and truths (see the module docstring); `max_batches` bounds its size."""
    device = device or draw(st.sampled_from(["cpu", "cuda"]))
    plug = draw(st.sampled_from([None, None, "hf", "factory"]))
    batches = sorted(draw(st.lists(st.sampled_from([8, 32, 128, 512]), min_size=1, max_size=max_batches, unique=True)))
    precisions = ["fp32"] if device == "cpu" else draw(
        st.lists(st.sampled_from(["bf16", "fp32"]), min_size=1, max_size=2, unique=True))
    modes = draw(st.lists(st.sampled_from(["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]),
                          min_size=1, max_size=2, unique=True))
    # on CUDA the whole-step graph with or without its eager control (eager-step-graph), or the control alone
    graphs = [("step-graph",), ("step-graph", "eager-step-graph"), ("eager-step-graph",)] if device == "cuda" else []
    scopes = ["module", *draw(st.sampled_from([(), ("fused-adamw",), ("regional",), ("forward",), *graphs]))]
    regimes = ["static"] + draw(st.lists(st.sampled_from(["dynamic", "packed"]), max_size=1))
    k = 8 if device == "cuda" else 2
    phase = draw(st.sampled_from([0, k]))
    spec = Spec(device, plug, {(p, b): draw(st.floats(2.0, 300.0)) for p in precisions for b in batches},
                seed=draw(st.integers(0, 2**16)), phase=phase,
                concurrency=draw(st.sampled_from([(), (1.3, 1.4, 1.5), (0.9, 1.4, 2.0), (1.2, 1.3)])) if phase else (),
                concurrency_shape=draw(st.sampled_from(["rounds", "phase"])),
                portable=draw(st.sampled_from([0, 1, 3])) if phase else 0)
    spec.timer = tuple(draw(st.lists(st.tuples(st.sampled_from(modes), st.sampled_from(batches),
                                               st.sampled_from(precisions), st.sampled_from([0.93, 0.99, 1.06]),
                                               st.booleans()), max_size=2, unique_by=lambda t: t[:3])))
    spec.accuracy = tuple((m, p, *draw(st.sampled_from([(0.25, 0.25), (0.81, 0.805), (0.81, 0.78), (0.27, 0.80)])))
                          for m in modes for p in precisions)
    for p in precisions:
        for b in batches:
            for regime in regimes:
                for mode in ["eager", *modes]:
                    for scope in scopes if regime == "static" else ["module"]:
                        if not vocab.runs_with(mode, scope, regime):
                            continue
                        spec.configurations.append(_configuration(draw, mode, scope, regime, p, b, plug))
    return spec


def _configuration(draw, mode, scope, regime, precision, batch, plug) -> Configuration:
    repeats = draw(st.integers(1, 5))
    eager = mode == "eager"
    # eager's own whole-step graph removes the host as the compiled one does: a speedup of its own
    speedup = draw(st.sampled_from([0.5, 0.9, 1.0, 1.02, 1.3, 2.0, 4.0])) if not eager or scope in vocab.GRAPH_SCOPES \
        else 1.0
    failed = None
    if plug and vocab.plug_not_applicable(scope, regime):
        failed = "not_applicable"
    elif not eager and draw(st.integers(0, 9)) == 0:
        failed = draw(st.sampled_from(["oom", "compile_error"]))
    return Configuration(mode, scope, regime, precision, batch, speedup, draw(st.sampled_from([0.0, 0.01, 0.05, 0.3])),
                         repeats, draw(st.integers(1, repeats)), failed,
                         repeats if failed == "not_applicable" else draw(st.integers(0, repeats)) if failed else 0,
                         draw(st.integers(0, 4)) == 0)


def _search(c: Configuration, spec: Spec) -> str:
    """A max-autotune mode's GEMM search: "own" (the first such mode at its cell and scope searches), "shared" (a
    later one starts from it: grid.shared_search), or "" (a mode that searches nothing)."""
    if c.mode not in vocab.AUTOTUNE_MODES:
        return ""
    same = {o.mode for o in spec.configurations if (o.scope, o.regime, o.precision, o.batch) == (c.scope, c.regime,
                                                                                              c.precision, c.batch)}
    return "own" if next(m for m in vocab.AUTOTUNE_MODES if m in same) == c.mode else "shared"


def records(spec: Spec) -> list[dict]:
    """The run records of a study, as measure/run.py writes them (the fields the aggregation reads)."""
    rng = np.random.default_rng(spec.seed)
    out = []
    for c in spec.configurations:
        eager_ms = spec.eager_ms[(c.precision, c.batch)]
        for r in range(c.repeats):
            status = c.failed if r < c.failed_repeats else "ok"
            out.append(_record(c, r, status, eager_ms, rng, spec))
    return out


def _cache(c: Configuration, repeat: int, spec: Spec) -> str:
    """The cache a timed run found: warm after a compile phase; else its first repeats' empty (a later max-autotune
    mode's first repeat, empty but for the first mode's GEMM search)."""
    if spec.phase or repeat >= c.cold:
        return "warm"
    return vocab.SEARCH_SHARED if repeat == 0 and _search(c, spec) == "shared" else "cold"


def _record(c: Configuration, repeat: int, status: str, eager_ms: float, rng, spec: Spec) -> dict:
    cache = _cache(c, repeat, spec)
    env = {"device_type": spec.device, "device_name": "NVIDIA H200" if spec.device == "cuda" else "a 2-core CPU",
           "torch": "2.11.0", "python": "3.12", "cpu_cores": 2 if spec.device == "cpu" else 16,
           "triton": "3.6.0" if spec.device == "cuda" else None, "cuda": "13.0" if spec.device == "cuda" else None,
           "driver": "580" if spec.device == "cuda" else None, "git_commit": "abc", "git_dirty": False,
           "inductor_cache": cache, "float32_matmul_precision": "highest"}
    config = {"compile_mode": c.mode, "compile_scope": c.scope, "batch_size": c.batch, "shape_regime": c.regime,
              "precision": c.precision, "repeat": repeat, "interleave_chunk": 10}
    rec = {"schema_version": record.SCHEMA_VERSION, "config": config, "env": env, "status": status,
           "error": None if status == "ok" else f"{status} in a generated run", "metrics": {}}
    if status != "ok":
        return rec
    speedup = float(c.speedup * math.exp(rng.normal(0.0, c.spread)))
    ref = eager_ms * math.exp(rng.normal(0.0, 0.02))
    step = ref / speedup
    ref_times = list(ref * np.exp(rng.normal(0.0, 0.03, 40)))
    times = list(step * np.exp(rng.normal(0.0, 0.03, 40)))
    eager = c.mode == "eager"
    compile_s = 0.0 if eager else float(rng.uniform(1.0, 3.0) if cache == "warm" else rng.uniform(5.0, 60.0))
    tokens = 40.0 * c.batch * 1e3 / step * (2.0 if c.regime == "packed" else 1.0)
    prof = ({"kernels_per_step": 100, "idle_fraction": 0.3, "cpu_ms_per_step": step * 0.8,
             "device_busy_ms_per_step": step * float(rng.uniform(0.3, 1.0)), "wall_ms_per_step": step * 1.5,
             "triton_kernels_distinct": 0 if eager else 9, "distinct_kernels": 20,
             "top_kernels": [{"name": "triton_poi_fused_0", "calls_per_step": 2, "ms_per_step": 0.4, "share": 0.3}]}
            if spec.device == "cuda" else {"kernels_per_step": 300, "cpu_ms_per_step": step, "kernel_kind": "aten ops",
                                           "top_kernels": [{"name": "aten::addmm", "calls_per_step": 9,
                                                            "ms_per_step": step / 3, "share": 0.3}]})
    rec["metrics"] = {
        "steady_step_ms": step, "reference_step_ms": ref, "in_process_speedup": ref / step, "step_times_ms": times,
        "reference_step_times_ms": ref_times, "epoch1_s": 1.0 + compile_s + 0.1 * repeat, "epoch2_s": 1.0,
        "epoch_steps": min(60, ROWS // c.batch), "real_tokens_per_s": tokens, "padded_tokens_per_s": tokens * 2,
        "padding_fraction": 0.0 if c.regime == "packed" else 0.55, "distinct_shapes": 1 if c.regime != "dynamic" else 6,
        "graphs_compiled": None if eager else 1, "graph_breaks": None if eager else 0,
        "peak_memory_bytes": 2.0**30, "eval_accuracy": 0.8, "achieved_tflops": 100.0 / step,
        "real_tflops": 45.0 / step, "inference_step_ms": step / 3, "inference_speedup": speedup,
        "profile": prof, "reference_profile": prof,
        "overhead_s": {"gpu_wait_s": 0.0, "imports_s": 3.0, "cuda_init_s": 0.4, "compile_s": compile_s, "timed_s": 2.0,
                       "total_s": 6.0 + compile_s},
    } | ({"model_class": "GeneratedModel", "model_plug": "a generated plug", "model_params": 1234567}
         if spec.plug else {})
    return rec


def _schedule(recs: list[dict], k: int, rng) -> list[dict]:
    """The compile phase as it runs: every job asked for at once, each taking the first of k slots to come free
    (a GEMM search alone, with the whole host, after them all), so that the phase's end leaves some compiles with
    fewer at once. Each record gets its job's window (its wait for the slot booked as gpu_wait_s) and the most
    compiles it saw at once."""
    start, free, held = 1.8e9, [1.8e9] * k, []
    for rec in sorted(recs, key=lambda r: r["compile"]["alone"]):
        seconds = rec["metrics"]["epoch1_s"] + float(rng.uniform(0.5, 3.0))  # the process and its steps beside
        slot = 0 if rec["compile"]["alone"] else int(np.argmin(free))
        begin = max(free) if rec["compile"]["alone"] else free[slot]
        free = [begin + seconds] * k if rec["compile"]["alone"] else free[:slot] + [begin + seconds] + free[slot + 1:]
        held.append((begin, begin + seconds))
        rec["metrics"] |= {"job_window_unix": [start, begin + seconds], "overhead_s": {"gpu_wait_s": begin - start}}
    for rec, (a, b) in zip(sorted(recs, key=lambda r: r["compile"]["alone"]), held):
        rec["compile"]["at_once"] = max(sum(1 for c, d in held if c <= t < d) for t in [a] + [c for c, _ in held if a < c < b])
    return recs


def compile_records(spec: Spec) -> list[dict]:
    """The compile phase's records (core/compile_record.py), where the study had one: per compiled configuration
    whose runs did not all fail, its cold compiles, k at once (the contended ones last, as the phase ends), or one
    alone where a max-autotune mode searches its GEMMs, or one among the others where it starts from that search;
    its portable starts among them; each with its job's window (_schedule)."""
    if not spec.phase:
        return []
    rng = np.random.default_rng(spec.seed + 1)
    out = []
    for c in sorted(spec.configurations, key=lambda c: c.contended):  # the contended ones last
        if c.mode == "eager" or (c.failed and c.failed_repeats == c.repeats):
            continue
        search = _search(c, spec)
        for i in range(1 if search else min(3, c.cold)):
            alone = search == "own"
            at_once = 1 if alone else spec.phase  # the most at once, from the schedule (_schedule)
            seconds = float(rng.uniform(60.0, 200.0) if alone else rng.uniform(5.0, 60.0))
            cfg = record.RunConfig(c.mode, c.batch, c.regime, c.precision, i, compile_scope=c.scope)
            rec = compile_record.new(cfg, {}, {"device_type": spec.device}, {
                "index": i, "at_once": at_once, "slots": spec.phase, "cores": list(range(16 if alone else 2)),
                "threads": 2, "alone": alone, "inductor_cache": vocab.SEARCH_SHARED if search == "shared" else "cold"})
            rec["metrics"] = {"cold_compile_s": seconds, "epoch1_s": 1.0 + seconds, "epoch2_s": 1.0}
            out.append(rec)
        for i in range(spec.portable if c.scope in vocab.TRAINING_SCOPES else 0):  # the shipped artifacts loaded
            seconds, load = float(rng.uniform(1.0, 8.0)), float(rng.uniform(0.1, 1.0))
            cfg = record.RunConfig(c.mode, c.batch, c.regime, c.precision, i, compile_scope=c.scope)
            rec = compile_record.new(cfg, {}, {"device_type": spec.device}, {
                "index": i, "at_once": spec.phase, "slots": spec.phase, "cores": [0, 1], "threads": 2, "alone": False,
                "inductor_cache": "cold", "start": "portable"})
            rec["metrics"] = {"cold_compile_s": seconds, "epoch1_s": 1.0 + seconds, "epoch2_s": 1.0,
                              "artifacts_load_s": load, "artifacts_bytes": 11_000_000}
            out.append(rec)
    return _schedule(out, spec.phase, rng)


def checks(spec: Spec) -> dict:
    """The method checks by name, as their JSON files hold them: the compile-concurrency check and the timer check."""
    out = {}
    if spec.concurrency:
        out["compile_concurrency"] = {"applicable": True, "k": spec.phase, "cores_per_compile": 2, "host_cores": 16,
                                      "compile_mode": "default", "compile_scope": "module", "shape_regime": "static",
                                      "precision": "bf16", "batch_size": 32,
                                      "results": [{"ratio": r, "alone_s": 13.0, "batch_s": [13.0 * r] * spec.phase}
                                                  for r in spec.concurrency]}
        if spec.concurrency_shape == "phase":  # today's check: the phase's own compiles of its cell against alone
            out["compile_concurrency"] |= {"phase": [{"cold_compile_s": 13.0 * r, "at_once": spec.phase}
                                                     for r in spec.concurrency],
                                           "alone": [{"cold_compile_s": 13.0 * (1 + 0.02 * i), "first_step_s": 14.0}
                                                     for i in range(3)]}
            del out["compile_concurrency"]["results"]
    rows, eager = [], set()
    for mode, batch, precision, ratio, with_eager in spec.timer:
        step = spec.eager_ms[(precision, batch)] / 1.5
        timed = with_eager and (batch, precision) not in eager  # eager once per batch size and precision
        eager |= {(batch, precision)} if timed else set()
        sides = [(mode, ratio, step)] + ([("eager", 1.01, spec.eager_ms[(precision, batch)])] if timed else [])
        rows += [{"compile_mode": m, "batch_size": batch, "precision": precision, "rounds": 3, "harness_median_ms": ms,
                  "timer_median_ms": ms / r, "harness_rounds_ms": [ms * 0.97, ms, ms * 1.02],
                  "timer_rounds_ms": [ms / r, ms / r * 1.01, ms / r * 0.99], "do_bench_median_ms": ms,
                  "harness_vs_timer": r, "within_3pct": abs(r - 1) <= 0.03} for m, r, ms in sides]
    out["timer_check"] = {"results": rows}
    return out


@dataclass
class Paper:
    spec: Spec
    summary: pd.DataFrame
    report: object  # report.document.Report
    markdown: str
    context: dict  # config, facts, compiles (their table), checks (by name), drawn (figures' index), parity, readme


FACTS = {"description": "a generated corpus", "source": "synthetic", "vocab_size": 271, "max_len": 128,
         "splits": {s: {"rows": ROWS if s == "train" else 760, "pad_fraction_at_max_len": 0.58,
                        "class_counts": {c: 190 for c in "ABCD"},
                        "token_length_percentiles": {"p50": 40, "p90": 60, "p99": 90, "max": 128}}
                    for s in ("train", "eval")}}


def _read(recs: list[dict], tmp: str, reader) -> pd.DataFrame:
    paths = []
    for i, rec in enumerate(recs):
        paths.append(Path(tmp) / f"{reader.__module__.rsplit('.', 1)[-1]}{i}.json")
        paths[-1].write_text(json.dumps(rec))
    return reader(paths)


def paper(spec: Spec, edit=None, pool=None) -> Paper:
    """The study's records read back, summarised, judged, decided, built into a report model and rendered; `edit`
    (summary -> summary), where given, changes the summary before the claims, decisions and report read it (a
    hand-made study of tests/test_invariants.py sets intervals it needs); `pool` (summary -> the stored
    estimate's dict, hosts.load's shape), where given, the pool of the study's GPU kind (tests/test_pool_paper.py)."""
    with tempfile.TemporaryDirectory() as tmp:
        runs = _read(records(spec), tmp, record.table)
        compiles = _read(compile_records(spec), tmp, compile_record.table)
    by_name = checks(spec)
    summary = add_mfu(summarize(runs, ROWS, compiles, by_name), {p: {"tflops": 700.0} for p in ("bf16", "fp32")})
    summary = edit(summary) if edit else summary
    claims = claims_table(summary, None, FACTS)
    decisions = decide(summary, by_name, claims)
    model = MODEL | ({"hf_config": PLUGS["hf"]} if spec.plug == "hf" else
                     {"factory": PLUGS["factory"]} if spec.plug == "factory" else {})
    config = {"model": model, "train": {"lr": 3e-4}, "grids": {spec.device: _grids(spec)}}
    env = environment(runs) | {"peak_tflops": {p: 700.0 for p in set(summary.precision)},
                               "compile_phase": summary_module._phase(compiles, runs, by_name)}  # as summary.write
    parity = judge_parity(pd.DataFrame([{"compile_mode": m, "precision": p, "batch_size": 32, "loss_steps": 10,
                                         "train_steps": 10, "max_rel_loss_diff": 1e-4, "loss_rtol": 0.05, "loss_ok": True,
                                         "eager_accuracy": e, "compiled_accuracy": a,
                                         "accuracy_delta_points": 100 * (a - e), "accuracy_ok": abs(a - e) <= 0.01}
                                        for m, p, e, a in spec.accuracy], columns=PARITY_COLUMNS), FACTS)
    drawn = figures.drawable(summary, runs)
    report_checks = {"timer": by_name["timer_check"]["results"], "drift": [],
                     "compile_concurrency": by_name.get("compile_concurrency", {})}
    pooled = report.pool_in(summary, env.get("device_name"), pool(summary), None) if pool else None
    rep = report.build(summary, parity, claims, decisions, env, FACTS, config, spec.device, report_checks, "figures",
                       [], drawn, pooled)
    md = render.render(rep, "md")
    context = {"config": config, "facts": FACTS, "runs": runs, "compiles": compiles, "checks": by_name, "drawn": drawn,
               "parity": parity, "decisions": decisions,
               "readme": readme.build(runs, env, FACTS, [], md, "python -m compile_study rebuild <study>", [])}
    return Paper(spec, summary, rep, md, context)


def _grids(spec: Spec) -> list[dict]:
    """One sub-grid per configuration, so that the grid plans what the study ran (missing repeats show)."""
    return [{"name": f"g{i}", "compile_mode": [c.mode], "compile_scope": [c.scope], "batch_size": [c.batch],
             "shape_regime": [c.regime], "bucket_sets": [[32, 64, 96, 128]], "precision": [c.precision],
             "repeats": 5 if c.repeats < 5 and i % 3 == 0 else c.repeats, "warmup_steps": 5, "timed_steps": 40,
             "interleave_chunk": 10, "recompile_limit": 8, "max_epoch_steps": 60}
            for i, c in enumerate(spec.configurations)]
