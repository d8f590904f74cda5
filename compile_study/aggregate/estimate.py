"""How long a study will take: the plan printed before it starts, and the progress line after each run.

    python -m compile_study estimate config.yaml [overlays] --device cuda [--gpus 2]

Every job of the plan is counted, from what earlier studies measured (this study's records and calls, then
those of the stored studies under reference/):
- a run: every run starts from its configuration's warm cache; its wall time less its compile is the mean of
  earlier records of its kind (the most specific kind with records first: configuration, then
  mode/scope/regime, mode/scope, mode, compiled or not; repeat 0, with the evidence, apart from the later
  repeats), and its warm-cache load the mean of earlier warm records' of its kind. A record made before the
  launcher (no `env.launcher`) paid for a job start, an interpreter and its imports that no run pays now: its
  `process_start_s`, `imports_s` and what it left unbooked are replaced by LAUNCHER_S, the launcher's cost;
- a cold compile of the compile phase: the mean wall time of earlier compile records of its kind or, from
  studies made before the compile phase, of what a run's cold compile would take as a job of its own (its fixed
  cost, its compile and its two epochs), as if alone. The phase runs `slots` compiles at once, each as much
  longer than alone as the stored studies' compile_concurrency checks measured (their median ratio; AT_ONCE
  where none did), and a compile record made among others counts as that much longer than alone; a GEMM search
  runs alone, after or before them;
- every other job (data, parity, peak, MLP claim, method checks, summary, figures, paper, PDF, READMEs): the
  median time of its rule in earlier calls' Snakemake logs (walltime.py), a timed one logged before the
  launcher less that study's measured cost of a job start; without one, PRIOR_JOB_S. Two jobs grow with
  what they hold (PER_UNIT): the parity job with its checks, the MLP claim with its batch sizes; theirs is
  the median time per check or batch size, times the plan's;
- Snakemake itself: its start (PRIOR_START_S) and its bookkeeping between jobs (PRIOR_PER_JOB_S).
Newest studies first (calibrated): a kind is known from the newest study that measured it (by its calls'
dates; the study in progress, newest); an older study adds only the kinds no newer one measured, scaled by how
the newer ones measured the kinds both know (the sum of their means over the older study's). Hosts differ (the
same run 35% apart) and so do protocols (a study made before the compile phase paid a cold inference compile in
its first repeat): the newest study's host and protocol are the best guess. A kind nothing was measured for
falls back to PRIOR_RUN_S, and the message says how many did. Torch-free.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
from collections import defaultdict
from pathlib import Path

from compile_study.aggregate import walltime
from compile_study.core import compile_record, grid, record, vocab
from compile_study.core.layout import Layout

# Seconds, where nothing was measured yet; each says where it comes from.
# The launcher's own cost per run (process start, the imports the server did not preload, the environment,
# the record, the process's exit): CPU, median of this project's launcher records on 2 cores (2026-12-01); CUDA,
# an H200 measurement outside the study (an eager forked child's wall time less its CUDA init and
# its steps, 0.15 s), doubled until the study's own H200 records say better.
LAUNCHER_S = {"cpu": 0.6, "cuda": 0.3}
# A run of a kind never measured: first H200 runs (imports taken out) and 2-core CPU runs, cold and warm.
PRIOR_RUN_S = {
    "cuda": {True: {"eager": 8, "default": 24, "reduce-overhead": 24, "max-autotune": 140,
                    "max-autotune-no-cudagraphs": 140}, False: {"eager": 5, "compiled": 6}},
    "cpu": {True: {"eager": 8, "default": 60, "reduce-overhead": 60, "max-autotune": 200,
                   "max-autotune-no-cudagraphs": 200}, False: {"eager": 5, "compiled": 15}},
}
# Other jobs, by rule: 2-core CPU measurements of this project (2026-12-01), used for a GPU host too where its
# own logs have none (its CPU is faster: an upper bound).
PRIOR_JOB_S = {"prepare_data": 25, "study_config": 1, "study_facts": 1, "parity": 20, "measure_peak": 3,
               "mlp_claim": 20, "summarize": 8, "figures": 12, "paper": 6, "paper_pdf": 15, "study_readme": 4,
               "check_model": 5, "method_check:timer_check": 60, "method_check:reference_drift": 60,
               "method_check:concurrency": 60, "method_check:launcher": 60, "method_check:compile_concurrency": 150}
# Jobs whose time grows with what they hold: rule -> how many units a stored study's job held. The plan
# (plan_jobs) names the units of its own; PRIOR_JOB_S is per unit for these.
PER_UNIT = {
    "parity": lambda study: len(Layout(str(study)).stored_parity()),  # checks, run in the one job
    "mlp_claim": lambda study: len(json.loads(Path(Layout(str(study)).mlp).read_text())["rows"]),  # batch sizes
}
# A cold compile of a kind never measured: the study's own cold runs (2026-12-02 H200 reference: 17-22 s a
# configuration, 208 s a GEMM search; 2-core CPU: about 50 s). A portable start never measured: on an H200 (torch
# 2.11, outside the study) 2.2-2.8 s to the first step from the loaded artifacts, plus a compile job's fixed cost;
# on 2 CPU cores (torch 2.13) the C++ kernels are compiled again: about as long as a cold compile.
PRIOR_COMPILE_S = {"cuda": {"compiled": 25, "max-autotune": 210, "max-autotune-no-cudagraphs": 210, "portable": 8},
                   "cpu": {"compiled": 60, "max-autotune": 200, "max-autotune-no-cudagraphs": 200, "portable": 50}}
# How much longer a cold compile takes among the phase's others than alone, until a study's compile_concurrency
# check says: 8 at once on 2 cores each took 19.9-25.1 s against 19.9-23.0 s alone (one H200 host, torch 2.11).
AT_ONCE = 1.15
PRIOR_START_S = {"cpu": 6.0, "cuda": 8.0}  # Snakemake's start and DAG (CUDA: torch imported to see the GPU)
PRIOR_PER_JOB_S = 0.3  # Snakemake's bookkeeping between two jobs run in its own threads
TIMED_RULES = ("measure_peak", "mlp_claim", "method_check", "check_model")
COMPILE_RULES = ("parity",)  # jobs of the compile phase beside the cold compiles (a compile slot each)


def at_once_factor(references: str, device: str) -> float:
    """How much longer a cold compile takes among the phase's others than alone: the median ratio of the stored
    studies' compile_concurrency checks on `device` (checks/compile_concurrency.json), else AT_ONCE."""
    ratios = []
    for path in glob.glob(f"{references}/*/checks/compile_concurrency.json"):
        check = json.loads(Path(path).read_text())
        ratio = (check.get("summary") or {}).get("ratio")
        if check.get("applicable") and check.get("device") == device and ratio:
            ratios.append(float(ratio))
    return statistics.median(ratios) if ratios else AT_ONCE


def rule_of(job: walltime.Job) -> str:
    """A job's rule as the plan counts it: method checks by their check."""
    return f"method_check:{Path(job.output).stem}" if job.rule == "method_check" else job.rule


def _timed(rule: str) -> bool:
    return rule.split(":")[0] in TIMED_RULES
AGGREGATE_RULES = ("summarize", "figures", "paper", "study_readme")


def _class(evidence: bool, mode: str) -> tuple[bool, bool]:
    """(takes the evidence, is compiled): repeat 0 against the later repeats."""
    return bool(evidence), mode != "eager"


def _levels(key, cls) -> list[tuple]:
    kind = vocab.Regime.parse(key.shape_regime).kind
    compiled = "compiled" if key.compile_mode != "eager" else "eager"
    # a max-autotune mode never seen costs what the other one did (the GEMM search is most of a cold compile)
    searched = [("max-autotune modes", cls)] if key.compile_mode in vocab.AUTOTUNE_MODES else []
    return [(key.with_repeat(0), cls), (key.compile_mode, key.compile_scope, kind, cls),
            (key.compile_mode, key.compile_scope, cls), (key.compile_mode, cls), *searched, (compiled, cls)]


def run_cost(rec: dict, device: str) -> float | None:
    """A record's wall time as a run through the launcher would take it (module docstring)."""
    o = (rec.get("metrics") or {}).get("overhead_s") or {}
    total = o.get("total_s")
    if not total or rec.get("env", {}).get("device_type") != device:
        return None
    total -= o.get("redo_s") or 0.0  # one attempt: a run redone after a disturbance paid for its earlier ones
    if rec["env"].get("launcher"):
        return total
    unbooked = total - sum(v for k, v in o.items() if k != "total_s" and v)
    return total - (o.get("process_start_s") or 0) - (o.get("imports_s") or 0) - unbooked + LAUNCHER_S[device]


_READ: dict[str, tuple[float, dict | None]] = {}  # path -> (mtime, record): each record is read once a process


def _record(path: str) -> dict | None:
    mtime = os.path.getmtime(path)
    if path not in _READ or _READ[path][0] != mtime:
        try:
            _READ[path] = (mtime, record.read(path))
        except (OSError, ValueError, KeyError):
            _READ[path] = (mtime, None)
    return _READ[path][1]


def study_of(path: str) -> str:
    """The study a record belongs to: the directory above its runs/ or compiles/ tree (else its own folder)."""
    for tree in ("/runs/", "/compiles/"):
        if tree in path:
            return path.rsplit(tree, 1)[0]
    return os.path.dirname(path)


def _newest(study: str) -> str:
    """When a study last ran (its last call's start, UTC ISO); a study without logged calls counts as newest
    (the study in progress, a test's records)."""
    calls = walltime.read_calls(Path(study) / "calls.jsonl")
    return max((c.get("start_utc", "") for c in calls), default="~")


def calibrated(by_study: dict[str, dict], finest=lambda kind: True) -> dict[tuple, list[float]]:
    """Per-study observations (study -> kind -> seconds) -> kind -> seconds, newest studies first (module
    docstring): an older study's kinds that no newer one has, scaled by the newer ones' sum of means over its own
    on the `finest` kinds both have (1 where none)."""
    out: dict = {}
    for study in sorted(by_study, key=lambda s: (_newest(s), s), reverse=True):
        seen = by_study[study]
        both = [k for k in seen if k in out and finest(k)]
        theirs = sum(statistics.mean(seen[k]) for k in both)
        scale = sum(statistics.mean(out[k]) for k in both) / theirs if both and theirs > 0 else 1.0
        for kind, values in seen.items():
            if kind not in out:
                out[kind] = [v * scale for v in values]
    return defaultdict(list, out)


def _configuration_level(kind: tuple) -> bool:
    """A kind of one configuration (_levels' first; a warm load's too): what two studies compare on."""
    inner = kind[1] if kind and kind[0] == "warm" else kind
    return bool(inner) and isinstance(inner[0], record.RunKey)


def model_of(model: dict | None) -> tuple:
    """Which model a study or record measured: the built-in one (its sizes aside) or a plug, by name and plug."""
    model = model or {}
    return model.get("name"), model.get("factory"), json.dumps(model.get("hf_config"), sort_keys=True)


def known_runs(patterns: list[str], device: str, model: dict | None = None) -> dict[tuple, list[float]]:
    """Each kind (_levels) -> the launcher-equivalent wall times less their compile of the records of that kind,
    and ("warm", kind) -> the compile of the warm ones (their cache's load), of `model`'s studies only (config
    `model`; None: the built-in model): a plugged model builds and compiles in its own time. Newest studies
    first (calibrated)."""
    by_study: dict[str, dict[tuple, list[float]]] = defaultdict(lambda: defaultdict(list))
    for pattern in patterns:
        for path in glob.glob(pattern, recursive=True):
            rec = _record(path)
            cost = run_cost(rec, device) if rec else None
            if cost is None or rec.get("kind") or model_of(rec["config"].get("model")) != model_of(model):
                continue
            key, cfg = record.RunKey.of(rec["config"]), rec["config"]
            compile_s = rec["metrics"]["overhead_s"].get("compile_s") or 0.0
            warm = rec["env"].get("inductor_cache") == "warm" or cfg["compile_mode"] == "eager"
            out = by_study[study_of(path)]
            for level in _levels(key, _class(cfg.get("evidence", key.repeat == 0), key.compile_mode)):
                out[level].append(cost - compile_s)
                if warm:
                    out[("warm", level[:-1])].append(compile_s)
    return calibrated(by_study, _configuration_level)


def plan_records(layout: Layout, references: str = "reference") -> list[str]:
    """Where the estimate finds the records it learns from: this study's and the stored studies'."""
    return [layout.records_glob, f"{references}/*/runs/**/r*.json"]


def run_seconds(key: record.RunKey, device: str, known: dict) -> tuple[float, bool]:
    """-> (estimated seconds of one run, from its warm cache; whether it came from records)."""
    cls = _class(key.repeat == 0, key.compile_mode)
    levels = _levels(key, cls)
    rest = next((statistics.mean(known[lv]) for lv in levels if known.get(lv)), None)
    load = next((statistics.mean(known[("warm", lv[:-1])]) for lv in levels if known.get(("warm", lv[:-1]))), 0.0)
    if rest is not None:
        return rest + load, True
    prior = PRIOR_RUN_S[device][False]
    return prior.get(key.compile_mode, prior.get("compiled" if cls[1] else "eager", 60)) + (
        PRIOR_RUN_S[device][True].get("eager", 8) - prior["eager"] if cls[0] else 0.0), False


def compile_cost(rec: dict, device: str) -> float | None:
    """A cold compile's wall time: a compile record's; or, from a timed run that compiled cold (a study made
    before the compile phase), what its compile would take as a job of its own: the run's fixed cost, its
    compile and its two epochs."""
    if rec.get("env", {}).get("device_type") != device or rec.get("status") != "ok":
        return None
    m = rec.get("metrics") or {}
    o = m.get("overhead_s") or {}
    if rec.get("kind") == compile_record.KIND:
        return o.get("total_s")
    if rec["env"].get("inductor_cache") not in ("cold", vocab.SEARCH_SHARED) or rec["config"]["compile_mode"] == "eager":
        return None
    fixed = run_cost(rec, device) - sum(o.get(k) or 0.0 for k in record.WORK) if run_cost(rec, device) else None
    if fixed is None or m.get("epoch2_s") is None:
        return None
    return fixed + (o.get("compile_s") or 0.0) + 2 * m["epoch2_s"]


def known_compiles(patterns: list[str], device: str, model: dict | None = None,
                   factor: float = AT_ONCE) -> dict[tuple, list[float]]:
    """Each kind (_levels, with the class "cold") -> cold compiles' wall times as if alone (compile_cost; a compile
    record made among others divided by `factor`, at_once_factor), of `model`'s studies, newest first (calibrated)."""
    by_study: dict[str, dict[tuple, list[float]]] = defaultdict(lambda: defaultdict(list))
    for pattern in patterns:
        for path in glob.glob(pattern, recursive=True):
            rec = _record(path)
            cost = compile_cost(rec, device) if rec else None
            if cost is None or model_of(rec["config"].get("model")) != model_of(model):
                continue
            if (rec.get("compile") or {}).get("at_once", 1) > 1:
                cost /= factor
            key = record.RunKey.of(rec["config"]).with_repeat(0)
            how = rec.get("compile") or {}
            shared = how.get("inductor_cache", rec["env"].get("inductor_cache")) == vocab.SEARCH_SHARED
            start = "portable" if how.get("start") == "portable" else "shared" if shared else "cold"
            for level in _levels(key, (start,)):
                by_study[study_of(path)][level].append(cost)
    return calibrated(by_study, _configuration_level)


def plan_compiles(layout: Layout, references: str = "reference") -> list[str]:
    """Where the estimate finds the cold compiles it learns from: compile records, and cold runs of older studies."""
    return [layout.compiles_glob, layout.compiles_glob.replace("/c*.json", "/p*.json"),
            f"{references}/*/compiles/**/[cp]*.json", f"{references}/*/runs/**/r0.json"]


def compile_seconds(key: record.RunKey, device: str, known: dict, search: str | None = None) -> float:
    """A cold compile's estimated seconds, alone. `search`: "own" for a max-autotune mode's GEMM search, "shared"
    for one that starts from another's; "portable" prices a portable start instead."""
    cls = (search,) if search in ("shared", "portable") else ("cold",)
    for level in _levels(key.with_repeat(0), cls):
        if known.get(level):
            return statistics.mean(known[level])
    prior = PRIOR_COMPILE_S[device]
    if search == "portable":
        return prior["portable"]
    return prior.get(key.compile_mode, prior["compiled"]) if search == "own" else prior["compiled"]


def phase_seconds(at_once: list[float], alone: list[float], slots: int, factor: float = AT_ONCE) -> float:
    """The compile phase's wall time: the `at_once` jobs (cold compiles, parity checks), longest first, each to the
    slot free first, each `factor` times as long as alone (at_once_factor; the last slot to finish ends them);
    then the `alone` ones (GEMM searches) one by one."""
    ends = [0.0] * max(slots, 1)
    for seconds in sorted(at_once, reverse=True):
        ends[ends.index(min(ends))] += seconds * (factor if slots > 1 else 1.0)
    return max(ends) + sum(alone)


def known_jobs(studies: list[Path], device: str, model: dict | None = None) -> dict[str, list[float]]:
    """Rule -> seconds its jobs took in the logged calls of `model`'s studies (timed ones as under the launcher),
    newest studies first (calibrated on the rules both logged)."""
    by_study: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for study in studies:
        records = [r for r in (_record(p) for p in Layout(str(study)).stored_records()) if r]
        if not records or records[0]["env"].get("device_type") != device:
            continue
        if model_of(records[0]["config"].get("model")) != model_of(model):
            continue
        old = [r for r in records if not r["env"].get("launcher")]
        start = _old_job_start(study, old, device) if old else 0.0
        units = {rule: _units(count, study) for rule, count in PER_UNIT.items()}
        for call in walltime.read_calls(study / "calls.jsonl"):
            log = study / "logs" / call.get("snakemake_log", "-")
            if not log.is_file():
                continue
            jobs = walltime.jobs_of(log.read_text(), walltime._utc(call["start_utc"]))
            one_each = sum(job.rule == "parity" for job in jobs) > 1  # a job per parity check (the compile phase)
            for job in jobs:
                held = 1 if job.rule == "parity" and one_each else units.get(job.rule, 1)
                if job.end is not None and job.rule not in ("train_run", "cold_compile") and held:
                    cut = start if _timed(job.rule) else 0.0
                    by_study[str(study)][rule_of(job)].append(max(0.0, job.end - job.start - cut) / held)
    return calibrated(by_study)


def job_seconds(rule: str, logged: dict[str, list[float]], units: int = 1) -> float:
    """A job's estimated seconds (rule as rule_of names it; `logged`: known_jobs): the median of its rule's
    logged jobs, else PRIOR_JOB_S; a PER_UNIT rule's times its `units`."""
    return units * (statistics.median(logged[rule]) if logged.get(rule) else PRIOR_JOB_S.get(rule, 60))


def stored_studies(references: str = "reference") -> list[Path]:
    """The stored studies whose logged calls the estimate reads (known_jobs)."""
    return sorted(Path(p).parent for p in glob.glob(f"{references}/*/calls.jsonl"))


def _units(count, study: Path) -> int:
    """How many units (PER_UNIT) a stored study's job held; 0 where it cannot be told (the job is not counted)."""
    try:
        return count(study)
    except (OSError, ValueError, KeyError):
        return 0


def _old_job_start(study: Path, old: list[dict], device: str) -> float:
    """What a timed job of a study made before the launcher paid to start: its runs' median of (the job's
    logged time less the run's launcher-equivalent time)."""
    runs = {str(Path(p).relative_to(study)): _record(p) for p in Layout(str(study)).stored_records()}
    gaps = []
    for call in walltime.read_calls(study / "calls.jsonl"):
        log = study / "logs" / call.get("snakemake_log", "-")
        if log.is_file():
            for job in walltime.jobs_of(log.read_text(), walltime._utc(call["start_utc"])):
                rec = runs.get(job.output)
                if job.rule == "train_run" and job.end is not None and rec and run_cost(rec, device):
                    gaps.append(job.end - job.start - run_cost(rec, device) + LAUNCHER_S[device])
    return statistics.median(gaps) if gaps else 0.0


def plan_jobs(parity: int, checks: list[str], pdf: bool | None = None, mlp_sizes: int = 1) -> dict[str, int]:
    """Rule (method checks: by check) -> how many jobs of it a whole study has, the runs and cold compiles apart,
    or for a PER_UNIT rule its units: `parity` checks (a job each), the MLP claim's `mlp_sizes` batch sizes."""
    pdf = shutil.which("latexmk") is not None if pdf is None else pdf
    return {"prepare_data": 1, "study_config": 1, "study_facts": 1, "check_model": 1, "parity": parity,
            "measure_peak": 1, "mlp_claim": mlp_sizes, "summarize": 1, "figures": 1, "paper": 1, "paper_pdf": int(pdf),
            "study_readme": 1} | {f"method_check:{name}": 1 for name in checks}


def config_jobs(config: dict, runs: dict, device: str, pdf: bool | None = None) -> dict[str, int]:
    """plan_jobs of a whole study of `config` on `device` (`runs`: its grid, expanded)."""
    return plan_jobs(len(grid.parity_pairs(runs)), (config.get("checks") or {}).get(device, []), pdf,
                     mlp_sizes(config, device))


def mlp_sizes(config: dict, device: str) -> int:
    """The MLP claim's batch sizes on `device` in a config (its job's units)."""
    return len(((config.get("claims") or {}).get("mlp") or {}).get(device, {}).get("batch_sizes", [64]))


def search_kind(c: dict) -> str | None:
    """How a planned cold compile searches the GEMMs (compile_seconds `search`)."""
    return "own" if c["alone"] else "shared" if c["search_from"] is not None else None


def compiles_todo(compiles: dict, layout: Layout) -> list[tuple[record.RunKey, dict]]:
    """The plan's cold compiles (core/grid.py compiles) whose records are not there yet: (key, its plan) each."""
    return [(key, c) for key, c in compiles.items() for i in range(c["n"])
            if not Path(layout.compile_record(key, i)).exists()]


def portable_todo(compiles: dict, layout: Layout) -> list[record.RunKey]:
    """The plan's portable starts whose records are not there yet: their configuration's key each."""
    return [key for key, c in compiles.items() for i in range(c.get("portable", 0))
            if not Path(layout.portable_record(key, i)).exists()]


def estimate(runs: dict, layout: Layout, device: str, jobs: dict[str, int] | None = None, gpus: int = 1,
             references: str = "reference", model: dict | None = None, compiles: dict | None = None,
             slots: int = 1) -> dict:
    """The plan's cold compiles (`compiles`: core/grid.py compiles, `slots` at once), runs and other jobs still to
    do -> seconds by part, and how many runs came from records of the same model (config `model`)."""
    studies = stored_studies(references)
    known = known_runs(plan_records(layout, references), device, model)
    todo = [key for key in runs if not Path(layout.record(key)).exists()]
    per_run = [run_seconds(key, device, known) for key in todo]
    logged = known_jobs(studies, device, model)
    jobs = jobs if jobs is not None else plan_jobs(0, [])
    other = {rule: job_seconds(rule, logged, n) for rule, n in jobs.items() if n}
    if "method_check:concurrency" in other and gpus < 2 and not logged.get("method_check:concurrency"):
        other["method_check:concurrency"] = PRIOR_JOB_S["measure_peak"]  # one GPU: it only says it does not apply
    factor = at_once_factor(references, device)
    known_c = known_compiles(plan_compiles(layout, references), device, model, factor)
    if "method_check:compile_concurrency" in other:  # its cell compiled cold, alone, one after another
        from compile_study.checks.compile_concurrency import CELLS, N_ALONE  # torch-free

        mode, batch, precision = CELLS[device]
        cell = record.RunKey(mode, "module", batch, "static", precision, 0)
        other["method_check:compile_concurrency"] = N_ALONE * compile_seconds(cell, device, known_c)
    cold = [(c, compile_seconds(key, device, known_c, search_kind(c))) for key, c in compiles_todo(compiles or {}, layout)]
    portable = [compile_seconds(key, device, known_c, "portable") for key in portable_todo(compiles or {}, layout)]
    parity = [other.pop("parity") / jobs["parity"]] * jobs["parity"] if "parity" in other else []
    phase = phase_seconds([s for c, s in cold if not c["alone"]] + portable + parity,
                          [s for c, s in cold if c["alone"]], slots, factor)
    timed = sum(s for s, _ in per_run) + sum(v for r, v in other.items() if _timed(r))
    rest = sum(v for r, v in other.items() if not _timed(r))
    snakemake = PRIOR_START_S[device] + PRIOR_PER_JOB_S * (len(todo) + len(cold) + len(portable) + sum(jobs.values()))
    seconds = phase + timed / max(gpus, 1) + rest + snakemake
    return {"total": len(runs), "todo": len(todo), "measured": sum(m for _, m in per_run), "compiles": len(cold),
            "portable": len(portable),
            "compile_s": phase, "runs_s": sum(s for s, _ in per_run), "other_s": other, "snakemake_s": snakemake,
            "seconds": seconds}


def plan_message(runs: dict, layout: Layout, device: str, gpus: int = 1, jobs: dict | None = None,
                 model: dict | None = None, compiles: dict | None = None, slots: int = 1) -> str:
    """One line: runs to do and the whole plan's estimated wall time (walltime.plan_seconds reads it back)."""
    return message(estimate(runs, layout, device, jobs, gpus, model=model, compiles=compiles, slots=slots), device,
                   gpus, slots)


def message(e: dict, device: str, gpus: int, slots: int) -> str:
    """The plan line of an estimate (estimate's parts)."""
    source = f"{e['measured']} of {e['todo']} runs from earlier records" if e["measured"] else "per-mode priors"
    where = (f"on {gpus} GPUs with --resources timed_run={gpus}" if device == "cuda" and gpus > 1
             else "on one GPU" if device == "cuda" else "on the CPU")
    portable = f", {e['portable']} portable starts" if e.get("portable") else ""
    return (f"study plan: {e['compiles']} cold compiles{portable} and {e['todo']} of {e['total']} runs to do, about "
            f"{e['seconds'] / 60:.1f} min {where} ({e['seconds']:.0f} s in all: compile phase {e['compile_s']:.0f} s "
            f"({slots} at once), runs {e['runs_s']:.0f} s, other jobs {sum(e['other_s'].values()):.0f} s, Snakemake "
            f"{e['snakemake_s']:.0f} s; runs estimated from {source})")


def progress_message(runs: dict, layout: Layout, device: str, gpus: int = 1, model: dict | None = None,
                     compiles: dict | None = None) -> str:
    """Cold compiles and runs done / planned, and the estimate of the runs left, scaled by how this study's runs
    compare with it."""
    done = [key for key in runs if Path(layout.record(key)).exists()]
    known = known_runs(["reference/*/runs/**/r*.json"], device, model)
    measured = [(_record(layout.record(key)), run_seconds(key, device, known)[0]) for key in done]
    actual = [(run_cost(rec, device), guess) for rec, guess in measured if rec and run_cost(rec, device)]
    scale = sum(a for a, _ in actual) / sum(g for _, g in actual) if actual else 1.0
    left = sum(run_seconds(key, device, known)[0] for key in runs if key not in set(done)) * scale / max(gpus, 1)
    planned = sum(c["n"] for c in (compiles or {}).values())
    cold = f"{planned - len(compiles_todo(compiles or {}, layout))}/{planned} cold compiles, " if planned else ""
    return f"progress: {cold}{len(done)}/{len(runs)} runs recorded; runs left: about {left / 60:.1f} min"


# The host a study of each device is planned for where none is named: the lent H200 hosts' 16 cores; a CPU study
# on the machine at hand.
HOST_CORES = {"cuda": 16}


def config_estimate(config: dict, device: str, layout: Layout, gpus: int = 1, cores: int | None = None,
                    references: str = "reference", pdf: bool | None = None) -> tuple[dict, int]:
    """The estimate of a whole study of a (validated) config -> (estimate's parts, compile slots): its grid, its
    compile phase (`cores` / compile_phase.cores_per_compile at once) and every other job."""
    runs = grid.expand(config["grids"][device])
    phase = config["compile_phase"][device]
    cores = cores or HOST_CORES.get(device) or len(os.sched_getaffinity(0))
    slots = max(1, cores // phase["cores_per_compile"])
    e = estimate(runs, layout, device, config_jobs(config, runs, device, pdf), gpus, references, config["model"],
                 grid.compiles(runs, phase["n_cold"], phase["n_portable"]), slots)
    return e, slots


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Estimate a study's wall time from its grid.")
    parser.add_argument("configs", nargs="+", help="config.yaml, then overlays")
    parser.add_argument("--device", required=True, choices=["cpu", "cuda"])
    parser.add_argument("--gpus", type=int, default=1, help="timed runs at once (one per GPU)")
    parser.add_argument("--cores", type=int, default=None,
                        help="the study host's cores (default: 16 for cuda, as the H200 hosts; this machine's for cpu)")
    args = parser.parse_args(argv)
    config = grid.load_config(args.configs)
    e, slots = config_estimate(config, args.device, Layout(f"results/{args.device}"), args.gpus, args.cores)
    print(message(e, args.device, args.gpus, slots))


if __name__ == "__main__":
    main()
