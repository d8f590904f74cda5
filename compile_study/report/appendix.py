"""The appendix of the report model: per-configuration detail, scopes, noise, shapes, profiler, kernels, parity,
method checks, failures and environment. Rows are formatted strings; sections with no data are left out.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter

import pandas as pd

from compile_study.aggregate import numbers as n
from compile_study.core import grid, stats, vocab
from compile_study.core.record import RunKey
from compile_study.report.document import Column, Para, Section, Table, plain


def _sorted(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return df.assign(_m=df.compile_mode.map(vocab.COMPILE_MODES.index)).sort_values(keys + ["_m"])


def _ok(r) -> bool:
    return r["status"] in vocab.USABLE_STATUSES


def _failed(r) -> str:
    return f"{vocab.failure_label(r['status'])} at batch {int(r['batch_size'])}"


def _cols(spec: str) -> list[Column]:
    """'precision|batch:r|...' -> columns; ':r' right-aligns, ':r2' also doubles the width."""
    out = []
    for part in spec.split("|"):
        head, _, fmt = part.partition(":")
        out.append(Column(head, "r" if fmt.startswith("r") else "l", float(fmt[1:] or 1) if fmt[:1] in "rl" and fmt[1:]
                          else 1.0))
    return out


def detail_table(summary: pd.DataFrame) -> Table:
    rows = []
    for _, r in _sorted(vocab.headline(summary), ["precision", "batch_size"]).iterrows():
        ok, comp = _ok(r), r["compile_mode"] != "eager"
        c = ok and comp
        rows.append([r["precision"], str(int(r["batch_size"])), r["compile_mode"], f"{int(r['n_ok'])}/{int(r['n'])}",
                     n.ms(r["steady_step_ms"]) if ok else _failed(r), n.ms(r["reference_step_ms"]),
                     n.times(r["cross_process_speedup"]) if c else n.DASH,
                     n.seconds(r["warm_compile_s"]) if c else n.DASH, n.fixed(r["memory_ratio"]) if c else n.DASH,
                     n.percent(r["eval_accuracy"]) if ok else n.DASH, n.ms(r["inference_step_ms"]) if ok else n.DASH,
                     n.row_interval(r, "inference") if c else n.DASH])
    cols = _cols("precision|batch:r|mode:l1.5|n ok:r|step (ms):r|eager, same process (ms):r|cross-process:r|"
                 "warm compile:r|memory ratio:r|eval acc.:r|inference (ms):r|inference speedup [interval]:r2.4")
    return Table("detail", "Every static-shape configuration: repeats, the in-process and cross-process comparisons, "
                 "warm compile, memory (eager peak / compiled peak), accuracy and eval-mode inference.", cols, rows)


def scopes_table(summary: pd.DataFrame) -> Table | None:
    keys = summary[summary.compile_scope != "module"][["precision", "batch_size"]].drop_duplicates()
    if keys.empty:
        return None
    order = {s: i for i, s in enumerate(vocab.COMPILE_SCOPES)}
    rows = []
    for k in keys.sort_values(["precision", "batch_size"]).itertuples():
        sel = summary[(summary.precision == k.precision) & (summary.batch_size == k.batch_size)
                      & (summary.shape_regime == "static") & summary.compile_mode.isin(["eager", "default"])]
        sel = sel.assign(_s=sel.compile_scope.map(order), _e=sel.compile_mode != "eager").sort_values(["_e", "_s"])
        for _, r in sel.iterrows():
            ok, c = _ok(r), _ok(r) and r["compile_mode"] != "eager"
            phases = " / ".join(n.times(r[f"{p}_speedup"]) for p in ("forward", "backward", "optimizer"))
            rows.append([r["precision"], str(int(r["batch_size"])),
                         f"eager ({r['compile_scope']})" if r["compile_mode"] == "eager" else r["compile_scope"],
                         n.ms(r["steady_step_ms"]) if ok else _failed(r), n.row_interval(r) if c else n.DASH,
                         r["verdict"] if c else n.DASH, n.count(r["graphs_compiled"]) if c else n.DASH,
                         n.count(r["graph_breaks"]) if c else n.DASH, phases if c else n.DASH,
                         n.seconds(r["cold_compile_s"]) if c else n.DASH])
    cols = _cols("precision|batch:r|what is compiled:l1.4|step (ms):r|speedup [interval]:r2.4|verdict:l1.4|"
                 "graphs:r|graph breaks:r|phase speedups fwd / bwd / opt:l1.8|cold compile:r")
    text = "; ".join(f"{s}: {vocab.SCOPE_TEXT[s]}" for s in sorted(set(summary.compile_scope), key=order.get))
    return Table("scopes", f"What is compiled, default mode ({plain(text)}).", cols, rows)


def noise_table(summary: pd.DataFrame) -> Table:
    rows = []
    eager = vocab.usable(summary[(summary.compile_mode == "eager") & (summary.compile_scope == "module")])
    for _, r in eager.sort_values(["reference_regime", "precision", "batch_size"]).iterrows():
        cell = summary[(summary.reference_regime == r["reference_regime"]) & (summary.precision == r["precision"])
                       & (summary.batch_size == r["batch_size"]) & (summary.compile_mode != "eager")]
        rows.append([r["reference_regime"], r["precision"], str(int(r["batch_size"])), str(int(r["n_ok"])),
                     n.row_interval(r), f"[{n.fixed(r['aa_low'], 3)}, {n.fixed(r['aa_high'], 3)}]",
                     plain(r["aa_method"]), n.percent(r["step_cv_across_repeats"], 2),
                     n.percent(cell.step_cv_across_repeats.max(), 2) if len(cell) else n.DASH])
    cols = _cols("shapes|precision|batch:r|n:r|A/A ratio [interval]:r2|A/A band:r1.3|band method:l2.4|"
                 "eager CV across processes:r|max compiled CV:r")
    return Table("noise", "Noise and controls: each cell's eager-vs-eager ratio, its A/A band and how much step "
                 "times move between processes.", cols, rows)


def regime_table(summary: pd.DataFrame) -> Table | None:
    sizes = set(summary[summary.shape_regime != "static"].batch_size)
    sel = summary[summary.batch_size.isin(sizes) & (summary.compile_scope == "module")]
    if sel.empty:
        return None
    rows = []
    for _, r in _sorted(sel, ["batch_size", "shape_regime"]).iterrows():
        ok, c = _ok(r), _ok(r) and r["compile_mode"] != "eager"
        fallback = n.count(r["eager_fallback_steps"]) if c and r.get("recompile_limit_hit") else n.DASH
        rows.append([str(int(r["batch_size"])), r["compile_mode"], r["shape_regime"],
                     n.row_interval(r) if c else (n.DASH if ok else _failed(r)), r["verdict"] if c else n.DASH,
                     n.count(r["distinct_shapes"]) if ok else n.DASH, fallback,
                     n.count(r["cudagraph_recordings"]) if c else n.DASH,
                     n.seconds(r["epoch1_s"]) if ok else n.DASH, n.seconds(r["epoch2_s"]) if ok else n.DASH])
    cols = _cols("batch:r|mode:l1.3|shapes:l1.8|speedup, same batches [interval]:r2.4|verdict:l1.4|"
                 "distinct shapes:r|eager steps past the limit:r|CUDA-graph recordings:r|epoch 1:r|epoch 2:r")
    text = "; ".join(f"{k}: {vocab.REGIME_TEXT[k]}" for k in vocab.REGIME_KINDS
                     if k in {vocab.Regime.parse(x).kind for x in sel.shape_regime})
    return Table("regimes", f"Shape regimes against eager on the same batches ({text}).", cols, rows)


def short_kernel(name: str) -> str:
    """A kernel's readable name: no return type, template arguments, parameters or namespaces; never cut mid-token.
    'void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<float, ...' -> 'GammaBeta…Template'."""
    text, depth, out = str(name).removeprefix("void "), 0, []
    for ch in text:
        if ch in "<({":
            depth += 1
        elif ch in ">)}" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    parts = [p.strip() for p in "".join(out).split("::") if p.strip()]
    return parts[-1] if parts else str(name)


def top_kernels(r) -> list[dict]:
    text = r.get("profile_top_kernels")
    return json.loads(text) if isinstance(text, str) and text.strip() else []


def profile_table(summary: pd.DataFrame) -> Table | None:
    sel = vocab.usable(vocab.headline(summary)).dropna(subset=["profile_kernels_per_step"])
    if sel.empty:
        return None
    rows = []
    for _, r in _sorted(sel, ["precision", "batch_size"]).iterrows():
        top = top_kernels(r)
        rows.append([r["precision"], str(int(r["batch_size"])), r["compile_mode"], n.count(r["profile_kernels_per_step"]),
                     n.count(r["reference_profile_kernels_per_step"]), n.percent(r["profile_idle_fraction"], 2),
                     n.percent(r["reference_profile_idle_fraction"], 2), n.ms(r["profile_cpu_ms_per_step"]),
                     n.ms(r["profile_device_busy_ms_per_step"]), n.count(r["profile_triton_kernels_distinct"]),
                     f"{short_kernel(top[0]['name'])} ({n.percent(top[0]['share'], 2)})" if top else n.DASH])
    kind = sel.kernel_kind.dropna().iloc[0] if sel.kernel_kind.notna().any() else "kernels"
    cols = _cols(f"precision|batch:r|mode:l1.3|{kind} / step:r|eager {kind} / step:r|idle:r|eager idle:r|"
                 "host CPU (ms/step):r|device busy (ms/step):r|Triton kernels:r|top kernel (share):l2.6")
    return Table("profile", "torch.profiler over a few steady-state steps after the timed block (the profiler slows "
                 "the host: these are not the timings above); eager columns are the in-process reference.", cols, rows)


def kernel_table(summary: pd.DataFrame) -> Table | None:
    sel = vocab.usable(vocab.headline(summary)).dropna(subset=["profile_kernels_per_step"])
    sel = sel[sel.compile_mode.isin(("eager", "default", "reduce-overhead"))]
    if sel.empty:
        return None
    sizes = sorted({sel.batch_size.min(), sel.batch_size.max()})
    rows = [[r["precision"], str(int(r["batch_size"])), r["compile_mode"], str(i), short_kernel(k["name"]),
             n.count(k["calls_per_step"]), n.ms(k["ms_per_step"]), n.percent(k["share"], 2)]
            for _, r in _sorted(sel[sel.batch_size.isin(sizes)], ["precision", "batch_size"]).iterrows()
            for i, k in enumerate(top_kernels(r), 1)]
    cols = _cols("precision|batch:r|mode:l1.3|#:r0.4|kernel:l4|calls / step:r|ms / step:r|share:r")
    return Table("kernels", f"Top kernels by device time at batch sizes {' and '.join(map(str, sizes))} (names "
                 "without namespaces and template arguments).", cols, rows) if rows else None


def parity_table(parity: pd.DataFrame) -> Table | None:
    if parity is None or parity.empty:
        return None
    rows = [[r.compile_mode, r.precision, str(int(r.batch_size)), f"{r.max_rel_loss_diff:.1e}", f"{r.loss_rtol:.0e}",
             "pass" if r.loss_ok else "FAIL", n.percent(r.eager_accuracy), n.percent(r.compiled_accuracy),
             n.fixed(r.accuracy_delta_points, 1), "pass" if r.accuracy_ok else "FAIL"]
            for r in parity.sort_values(["precision", "compile_mode"]).itertuples()]
    cols = _cols("mode:l1.3|precision|batch:r|max rel. loss diff:r|tolerance:r|loss|eager acc.:r|compiled acc.:r|"
                 "Δ (points):r|accuracy")
    return Table("parity", "Parity: dropout off, same seed and batches; loss within the precision's tolerance over the "
                 "first steps, eval accuracy within ±1 point after the same training.", cols, rows)


def check_tables(checks: dict) -> list[Table]:
    out = []
    if checks.get("timer"):
        rows = [[r["compile_mode"], str(r["batch_size"]), r["precision"], n.fixed(r["harness_median_ms"], 3),
                 n.fixed(r["timer_median_ms"], 3), n.fixed(r.get("do_bench_median_ms"), 3),
                 n.fixed(r["harness_vs_timer"], 3), "yes" if r["within_3pct"] else "no"] for r in checks["timer"]]
        out.append(Table("timer", "The harness against `torch.utils.benchmark.Timer` and `do_bench` on one training "
                         "step (medians of alternating rounds; target: within 3%).",
                         _cols("mode:l1.3|batch:r|precision|harness (ms):r|Timer (ms):r|do_bench (ms):r|"
                               "harness / Timer:r|within 3%"), rows))
    if checks.get("drift"):
        rows = [[r["compile_mode"], str(r["batch_size"]), n.fixed(r["before_ms"], 3), n.fixed(r["after_compile_ms"], 3),
                 n.fixed(r["interleaved_ms"], 3), n.fixed(r["interleaved_compiled_ms"], 3),
                 n.times(r["in_process_speedup"]), n.times(r["speedup_vs_before"])] for r in checks["drift"]]
        out.append(Table("drift", "Does compiling a model slow later eager steps in the same process? The same eager "
                         "model before anything is compiled, after a second model was compiled, and interleaved.",
                         _cols("mode:l1.3|batch:r|eager before (ms):r|after compile (ms):r|interleaved (ms):r|"
                               "compiled (ms):r|in-process speedup:r|vs eager before:r"), rows))
    return out


# stats.verdict reads a ratio as a speedup; here it is a step time's, concurrent over solo
CONCURRENT_VERDICT = {"faster": "two at once are measurably slower", "slower": "two at once are measurably faster"}


def concurrency_paras(check: dict, summary: pd.DataFrame) -> list[Para]:
    """The concurrency check's result against the A/A band of its cell in the study; none where it did not apply."""
    if not check.get("applicable"):
        return []
    s, cores = check["summary"], len(check["cores"][0])
    overlaps = n.span(s["overlaps"], lambda v: n.percent(v, 2))
    text = (f"Two timed runs at once on two GPUs ({plain(check['gpus'][0])}) of one host, each on its own {cores} "
            f"core{'s' if cores > 1 else ''} (1/{check['shares']} of the host's): step time "
            f"{n.interval(s['ratio'], s['low'], s['high'], s['method'])} of one run alone on the same GPU and cores, "
            f"over {len(check['results'])} rounds ({check['compile_mode']}, {check['shape_regime']} shapes, "
            f"{check['precision']}, batch {check['batch_size']}; the two timed blocks overlapping {overlaps}).")
    cell = summary[(summary.compile_mode == "eager") & (summary.compile_scope == "module")
                   & (summary.shape_regime == check["shape_regime"]) & (summary.precision == check["precision"])
                   & (summary.batch_size == check["batch_size"])]
    if cell.empty or not n.finite(cell.aa_low.iloc[0]):
        return [Para(text)]
    band = stats.Band(cell.aa_low.iloc[0], cell.aa_high.iloc[0], stats.NAN, stats.NAN, int(cell.aa_n.iloc[0]))
    iv = stats.speedup_interval(r["ratio"] for r in check["results"])
    verdict = stats.verdict(iv, band)
    return [Para(f"{text} The study's A/A band for that cell is [{n.fixed(band.low)}, {n.fixed(band.high)}]: "
                 f"{CONCURRENT_VERDICT.get(verdict, verdict)}.")]


# stats.verdict reads the ratio as a speedup: the launcher's run's speedup over the fresh process's
LAUNCHER_VERDICT = {"faster": "the launcher's runs measure a larger speedup",
                    "slower": "the launcher's runs measure a smaller speedup",
                    "no measurable difference": "the two ways agree within it"}


def launcher_paras(check: dict, summary: pd.DataFrame) -> list[Para]:
    """The launcher check (checks/launcher.py) against the A/A band of its cell in the study."""
    if not check.get("applicable"):
        return []
    s = check["summary"]
    fixed = {way: statistics.median(r["fixed_cost_s"][way] for r in check["results"]) for way in ("warm", "fresh")}
    text = (f"The same cell ({check['compile_mode']}, {check['shape_regime']} shapes, {check['precision']}, batch "
            f"{check['batch_size']}) run as the study runs it, by a process forked by the warm launcher and by a fresh "
            f"Python process, alternating, over {len(check['results'])} rounds: the launcher's in-process speedup is "
            f"{n.interval(s['ratio'], s['low'], s['high'], s['method'])} of the fresh process's; fixed cost per run "
            f"(median, all but compile, the timed protocol and the evidence) {n.fixed(fixed['warm'], 2)} s against "
            f"{n.fixed(fixed['fresh'], 2)} s.")
    cell = summary[(summary.compile_mode == check["compile_mode"]) & (summary.compile_scope == "module")
                   & (summary.shape_regime == check["shape_regime"]) & (summary.precision == check["precision"])
                   & (summary.batch_size == check["batch_size"])]
    if cell.empty or not n.finite(cell.aa_low.iloc[0]):
        return [Para(text)]
    band = stats.Band(cell.aa_low.iloc[0], cell.aa_high.iloc[0], stats.NAN, stats.NAN, int(cell.aa_n.iloc[0]))
    verdict = stats.verdict(stats.speedup_interval(r["ratio"] for r in check["results"]), band)
    return [Para(f"{text} The study's A/A band for that cell is [{n.fixed(band.low)}, {n.fixed(band.high)}]: "
                 f"{LAUNCHER_VERDICT.get(verdict, verdict)}.")]


def missing_runs(summary: pd.DataFrame, grids: list[dict]) -> list[str]:
    """Configurations of the grid with fewer records than repeats (a study stopped before they ran)."""
    expected = Counter(key.with_repeat(0) for key in grid.expand(grids))  # one count per configuration
    have = Counter({RunKey.of(r._asdict() | {"repeat": 0}): int(r.n) for r in summary.itertuples()})
    return [f"{k.compile_mode}, {k.compile_scope}, {k.shape_regime}, {k.precision}, batch {k.batch_size}: "
            f"{have[k]} of {want} repeats" for k, want in sorted(expected.items(), key=str) if have[k] < want]


def outcome_paras(summary: pd.DataFrame, grids: list[dict]) -> list:
    label = "{compile_mode}, {compile_scope}, {shape_regime}, {precision}, batch {batch_size}"
    failed = [f"{label.format(**r)}: {vocab.failure_label(r['status'])}: {plain(r['error'])}"
              for r in summary[~summary.status.isin(("ok",))].to_dict("records")]
    errors = [f"{label.format(**r)}: {plain(r['evidence_errors'])}"
              for r in summary[summary.evidence_errors.notna()].to_dict("records")]
    missing = missing_runs(summary, grids)
    out = []
    for title, lines in (("Failed or partly failed configurations", failed),
                         ("Evidence that could not be taken (the timings stand)", errors),
                         ("Not run (the study stopped before these; missing, not failed)", missing)):
        if lines:
            out.append(Para(f"{title}: " + "; ".join(lines) + "."))
    return out


def environment_para(env: dict) -> Para:
    def v(k):
        x = env.get(k)
        return plain(", ".join(map(str, x)) if isinstance(x, list) else x)
    statuses = ", ".join(f"{plain(k)} {c}" for k, c in (env.get("statuses") or {}).items())
    dirty = " (uncommitted changes)" if str(env.get("git_dirty")) == "True" else ""
    return Para(f"Device {v('device_name')}; CPU {v('cpu_model')} ({v('cpu_cores')} cores); torch {v('torch')}, triton "
                f"{v('triton')}, CUDA {v('cuda')}, driver {v('driver')}; Python {v('python')}; code {v('git_commit')}"
                f"{dirty}; {env.get('n_records')} records ({statuses}).")


# a method check's name (config `checks`, layout.CHECKS) -> its key in the report's `checks`
CHECK_KEYS = {"timer_check": "timer", "reference_drift": "drift", "concurrency": "concurrency",
              "launcher": "launcher"}


def sections(summary, parity, environment, config, device, checks) -> list[Section]:
    tables = [("Per-configuration detail", detail_table(summary)), ("What is compiled", scopes_table(summary)),
              ("Noise and controls", noise_table(summary)), ("Shape regimes in detail", regime_table(summary)),
              ("Profiler detail", profile_table(summary)), ("Top kernels", kernel_table(summary)),
              ("Parity", parity_table(parity))]
    out = [Section(title, [t]) for title, t in tables if t is not None]
    checks = checks or {}
    checks_found = (check_tables(checks) + concurrency_paras(checks.get("concurrency") or {}, summary)
                    + launcher_paras(checks.get("launcher") or {}, summary))
    missing = [name for name in config.get("checks", {}).get(device, []) if not checks.get(CHECK_KEYS[name])]
    if missing:
        checks_found.append(Para(f"Configured for this study but not in its files (the study stopped before them): "
                                 f"{', '.join(f'`{m}`' for m in missing)}."))
    if checks_found:
        out.append(Section("Checks of the method", checks_found))
    outcomes = outcome_paras(summary, config["grids"][device])
    if outcomes:
        out.append(Section("Failures, missing evidence, runs not made", outcomes))
    out.append(Section("Environment", [environment_para(environment)]))
    return out
