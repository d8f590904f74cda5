"""What each kind of job costs, from what earlier studies measured, as the estimate (estimate.py) prices a plan: this study's records
and calls, then those of the stored studies under reference/. Torch-free.

- a run: its wall time as a run through the launcher would take it now (run_cost: less the time it waited for
  the host, and less the redone attempts), less its compile, per kind (the most specific kind with records
  first: configuration, then mode/scope/regime, mode/scope, mode, compiled or not; repeat 0, with the evidence,
  apart from the later repeats); its warm-cache load (the compile of warm records); and its load phase less that
  (load_cost: the process, CUDA, data, the model, warm-up steps), which a run whose load overlaps the timed run
  before it hides. A record made before the launcher (no `env.launcher`) paid for a job start, an interpreter and
  its imports that no run pays now: its `process_start_s`, `imports_s` and what it left unbooked are replaced by
  LAUNCHER_S, the launcher's cost;
- a cold compile: the wall time of compile records of its kind or, from studies made before the compile phase,
  of what a run's cold compile would take as a job of its own (its fixed cost, its compile and its two epochs),
  as if alone: a compile record made among others counts as as much longer than alone as the stored studies'
  compile_concurrency checks measured (their median ratio), scaled to as many at once as ran with it,
  time-weighted from its study's compile records' windows, as the paper's cold starts are (at_once.py; AT_ONCE
  where none did);
- every other job: the time of its rule's jobs in earlier calls' Snakemake logs (walltime.py), a timed one logged
  before the launcher less that study's measured cost of a job start; three jobs grow with what they hold
  (PER_UNIT): the parity job with its checks, the MLP claim with its batch sizes, the timer check with its cases.
Newest studies first (calibrated): a kind is known from the newest study that measured it (by its calls'
dates; the study in progress, newest); an older study adds only the kinds no newer one measured, scaled by how
the newer ones measured the kinds both know (the sum of their means over the older study's). Hosts differ (the
same run 35% apart) and so do protocols (a study made before the compile phase paid a cold inference compile in
its first repeat): the newest study's host and protocol are the best guess.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from compile_study.aggregate.estimate import at_once, walltime
from compile_study.aggregate.estimate.at_once import AT_ONCE
from compile_study.core import compile_record, record, vocab
from compile_study.core.layout import STORED, Layout, study_of
from compile_study.core.layout import stored_studies as studies_holding
from compile_study.measure.checks.spec import method_checks

# Seconds, where nothing was measured yet.
# The launcher's own cost per run (process start, the imports the server did not preload, the environment,
# the record, the process's exit): CPU, median of this project's launcher records on 2 cores (2026-12-01); CUDA,
# an H200 measurement outside the study (an eager forked child's wall time less its CUDA init and
# its steps, 0.15 s), doubled until the study's own H200 records say better.
LAUNCHER_S = {"cpu": 0.6, "cuda": 0.3}


def _mlp_sizes(study: Path) -> list[int]:
    """The batch sizes of a stored study's MLP claim, in its rows' order ([] where it cannot be told)."""
    try:
        return [row["batch_size"] for row in json.loads(Path(Layout(str(study)).mlp).read_text())["rows"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _results(check: str, study) -> int:
    """How many results a stored study's method check holds (one a case it ran)."""
    return len(json.loads(Path(Layout(str(study)).check(check)).read_text())["results"])


# Jobs whose time grows with what they hold: rule (as rule_of names it) -> how many units a stored study's job
# held. The plan (plan_jobs) names the units of its own; PRIOR_JOB_S is per unit for these.
PER_UNIT = {
    "parity": lambda study: len(Layout(str(study)).stored_parity()),  # checks, run in the one job
    "mlp_claim": lambda study: len(_mlp_sizes(study)),  # batch sizes
} | {  # a method check with cases (its CHECK's): one result a case, one after another in the one process
    f"method_check:{c.name}": functools.partial(_results, c.name) for c in method_checks().values() if c.cases}
TIMED_RULES = ("measure_peak", "mlp_claim", "method_check", "check_model")


def mlp_rule(batch_sizes) -> str:
    """The MLP claim's job as the plan and known_jobs name it when it holds exactly these batch sizes
    ("mlp_claim:64+8192"): the sizes are not alike (a large batch's steps cost more; the job's start is most of a
    small one), so a study that ran the same sizes prices the whole job better than a count of them does."""
    return "mlp_claim:" + "+".join(str(b) for b in batch_sizes)


def rule_of(job: walltime.Job) -> str:
    """A job's rule as the plan counts it: method checks by their check."""
    return f"method_check:{Path(job.output).stem}" if job.rule == "method_check" else job.rule


def timed_rule(rule: str) -> bool:
    return rule.split(":")[0] in TIMED_RULES


def run_class(evidence: bool, mode: str) -> tuple[bool, bool]:
    """(takes the evidence, is compiled): repeat 0 against the later repeats."""
    return bool(evidence), mode != "eager"


def levels(key, cls) -> list[tuple]:
    kind = vocab.Regime.parse(key.shape_regime).kind
    compiled = "compiled" if key.compile_mode != "eager" else "eager"
    # a max-autotune mode never seen costs what the other one did (the GEMM search is most of a cold compile)
    searched = [("max-autotune modes", cls)] if key.compile_mode in vocab.AUTOTUNE_MODES else []
    return [(key.with_repeat(0), cls), (key.compile_mode, key.compile_scope, kind, cls),
            (key.compile_mode, key.compile_scope, cls), (key.compile_mode, cls), *searched, (compiled, cls)]


def run_cost(rec: dict, device: str) -> float | None:
    """A record's wall time as a run through the launcher would take it (module docstring): one attempt (a run
    redone after a disturbance paid for its earlier ones), without its waits for the host (another run's timed
    part, the compile phase: the schedule's, not the run's)."""
    o = (rec.get("metrics") or {}).get("overhead_s") or {}
    total = o.get("total_s")
    if not total or rec.get("env", {}).get("device_type") != device:
        return None
    total -= (o.get("redo_s") or 0.0) + (o.get("gpu_wait_s") or 0.0)
    if rec["env"].get("launcher"):
        return total
    unbooked = total - sum(v for k, v in o.items() if k not in ("total_s", "redo_s", "gpu_wait_s") and v)
    return total - (o.get("process_start_s") or 0) - (o.get("imports_s") or 0) - unbooked + LAUNCHER_S[device]


# What a run's load phase holds besides its warm-cache load (compile_s), where its record has no `load_phase`:
# the parts it booked before its timed protocol (the warm-up steps, in `timed_s`, apart: a few steps).
LOAD_PARTS = ("process_start_s", "imports_s", "cuda_init_s", "data_load_s", "flop_count_s")


def load_cost(rec: dict, device: str) -> float | None:
    """A run's load phase (measure/process/handover.py) less its waits for the host and its warm-cache load (compile_s), as
    a run through the launcher would take it: its `load_phase` parts where it has them, else LOAD_PARTS (with the
    launcher's cost for the process and imports of a record made before the launcher)."""
    o = (rec.get("metrics") or {}).get("overhead_s") or {}
    if not o.get("total_s") or rec.get("env", {}).get("device_type") != device:
        return None
    load = (rec["metrics"].get("load_phase") or {}).get("parts")
    if load:
        return sum(v for k, v in load.items() if k not in ("gpu_wait_s", "compile_s", "total_s"))
    fixed = sum(o.get(k) or 0.0 for k in LOAD_PARTS)
    if rec["env"].get("launcher"):
        return fixed
    return fixed - (o.get("process_start_s") or 0.0) - (o.get("imports_s") or 0.0) + LAUNCHER_S[device]


_READ: dict[str, tuple[float, dict | None]] = {}  # path -> (mtime, record): each record is read once a process


def cached_record(path: str) -> dict | None:
    mtime = os.path.getmtime(path)
    if path not in _READ or _READ[path][0] != mtime:
        try:
            _READ[path] = (mtime, record.read(path))
        except (OSError, ValueError, KeyError):
            _READ[path] = (mtime, None)
    return _READ[path][1]




def _newest(study: str) -> str:
    """When a study last ran (its last call's start, UTC ISO); a study without logged calls counts as newest
    (the study in progress, a test's records)."""
    calls = walltime.study_calls(study)
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
    """A kind of one configuration (levels' first; a warm load's too): what two studies compare on."""
    inner = kind[1] if kind and kind[0] in ("warm", "load") else kind
    return bool(inner) and isinstance(inner[0], record.RunKey)


def model_of(model: dict | None) -> tuple:
    """Which model a study or record measured: the built-in one (its sizes aside) or a plug, by name and plug."""
    model = model or {}
    return model.get("name"), model.get("factory"), json.dumps(model.get("hf_config"), sort_keys=True)


def known_runs(patterns: list[str], device: str, model: dict | None = None) -> dict[tuple, list[float]]:
    """Each kind (levels) -> the launcher-equivalent wall times less their compile of the records of that kind,
    ("warm", kind) -> the compile of the warm ones (their cache's load), ("load", kind) -> their load phase less
    that (load_cost), of `model`'s studies only (config
    `model`; None: the built-in model): a plugged model builds and compiles in its own time. Newest studies
    first (calibrated)."""
    by_study: dict[str, dict[tuple, list[float]]] = defaultdict(lambda: defaultdict(list))
    for pattern in patterns:
        for path in glob.glob(pattern, recursive=True):
            rec = cached_record(path)
            cost = run_cost(rec, device) if rec else None
            if cost is None or rec.get("kind") or model_of(rec["config"].get("model")) != model_of(model):
                continue
            key, cfg = record.RunKey.of(rec["config"]), rec["config"]
            compile_s = rec["metrics"]["overhead_s"].get("compile_s") or 0.0
            warm = rec["env"].get("inductor_cache") == "warm" or cfg["compile_mode"] == "eager"
            out = by_study[study_of(path)]
            for level in levels(key, run_class(cfg.get("evidence", key.repeat == 0), key.compile_mode)):
                out[level].append(cost - compile_s)
                if warm:
                    out[("warm", level[:-1])].append(compile_s)
                if load_cost(rec, device) is not None:
                    out[("load", level[:-1])].append(load_cost(rec, device))
    return calibrated(by_study, _configuration_level)


def plan_records(layout: Layout, references: str = STORED) -> list[str]:
    """Where the estimate finds the records it learns from: this study's and the stored studies'."""
    return [layout.records_glob, Layout(f"{references}/*").records_glob]


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
                   factor: float | Callable[[int], float] = AT_ONCE) -> dict[tuple, list[float]]:
    """Each kind (levels, with the class "cold") -> cold compiles' wall times as if alone (compile_cost; a compile
    record made among others divided by `factor`, or by `factor(k)` for a record made k at once: at_once.py), of
    `model`'s studies, newest first (calibrated); with the class "fixed", a compile record's share besides its
    compile (process, CUDA, data, its steps), alike."""
    by_study: dict[str, dict[tuple, list[float]]] = defaultdict(lambda: defaultdict(list))
    found = [path for pattern in patterns for path in glob.glob(pattern, recursive=True)]
    weighted = time_weighted_at_once(found)
    for path in found:
        rec = cached_record(path)
        cost = compile_cost(rec, device) if rec else None
        if cost is None or model_of(rec["config"].get("model")) != model_of(model):
            continue
        k = weighted.get(path, (rec.get("compile") or {}).get("at_once", 1))
        if k > 1:
            cost /= factor(k) if callable(factor) else factor
        key = record.RunKey.of(rec["config"]).with_repeat(0)
        how = rec.get("compile") or {}
        shared = how.get("inductor_cache", rec["env"].get("inductor_cache")) == vocab.SEARCH_SHARED
        start = "portable" if how.get("start") == "portable" else "shared" if shared else "cold"
        for level in levels(key, (start,)):
            by_study[study_of(path)][level].append(cost)
        if rec.get("kind") == compile_record.KIND and start == "cold":  # its job's cost besides the compile
            fixed = cost * (1 - (rec["metrics"]["overhead_s"].get("compile_s") or 0.0) / rec["metrics"]["overhead_s"]["total_s"])
            for level in levels(key, ("fixed",)):
                by_study[study_of(path)][level].append(fixed)
    return calibrated(by_study, _configuration_level)


def time_weighted_at_once(paths: list[str]) -> dict[str, float]:
    """Each compile record's k among `paths`: how many of its study's compile records held a slot while it held its
    own, time-weighted (at_once.mean_at_once; payback.py charges the paper's cold starts by the same k)."""
    by_study: dict[str, dict[str, list | None]] = defaultdict(dict)
    for path in paths:
        rec = cached_record(path)
        if rec and rec.get("kind") == compile_record.KIND:
            by_study[study_of(path)][os.path.realpath(path)] = compile_record.held(rec)
    weighted = {real: k for held in by_study.values()
                for real, k in zip(held, at_once.mean_at_once(list(held.values()))) if k is not None}
    return {path: weighted[os.path.realpath(path)] for path in paths if os.path.realpath(path) in weighted}


def plan_compiles(layout: Layout, references: str = STORED) -> list[str]:
    """Where the estimate finds the cold compiles it learns from: compile records and portable starts, and the
    first runs of older studies (cold before the compile phase)."""
    return [g for lay in (layout, Layout(f"{references}/*")) for g in (lay.compiles_glob, lay.portables_glob)] + [
        Layout(f"{references}/*").records_glob.replace("/r*.json", "/r0.json")]


def study_of_kind(runs: list[dict], device: str, model: dict | None = None) -> bool:
    """Whether a study whose run records are `runs` ran on `device` with `model` (its first record says)."""
    return bool(runs) and runs[0]["env"].get("device_type") == device and \
        model_of(runs[0]["config"].get("model")) == model_of(model)


def known_jobs(studies: list[Path], device: str, model: dict | None = None) -> dict[str, list[float]]:
    """Rule -> seconds its jobs took in the logged calls of `model`'s studies (timed ones as under the launcher),
    a PER_UNIT rule's per unit; the MLP claim's whole job also under mlp_rule of its batch sizes; newest studies
    first (calibrated on the rules both logged)."""
    by_study: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for study in studies:
        records = [r for r in (cached_record(p) for p in Layout(str(study)).stored_records()) if r]
        if not study_of_kind(records, device, model):
            continue
        old = [r for r in records if not r["env"].get("launcher")]
        start = _old_job_start(study, old, device) if old else 0.0
        units = {rule: _units(count, study) for rule, count in PER_UNIT.items()}
        mlp_sizes = _mlp_sizes(study)
        for jobs in walltime.logged_jobs(study):
            one_each = sum(job.rule == "parity" for job in jobs) > 1  # a job per parity check (the compile phase)
            for job in jobs:
                held = 1 if job.rule == "parity" and one_each else units.get(rule_of(job), 1)
                if job.end is not None and job.rule not in ("train_run", "cold_compile") and held:
                    cut = start if timed_rule(job.rule) else 0.0
                    seconds = max(0.0, job.end - job.start - cut)
                    by_study[str(study)][rule_of(job)].append(seconds / held)
                    if job.rule == "mlp_claim" and mlp_sizes:  # the whole job too, under its sizes
                        by_study[str(study)][mlp_rule(mlp_sizes)].append(seconds)
    return calibrated(by_study)


def stored_studies(references: str = STORED) -> list[Path]:
    """The stored studies whose logged calls the estimate reads (known_jobs)."""
    return studies_holding(Layout(".").calls, references)


def _units(count, study: Path) -> int:
    """How many units (PER_UNIT) a stored study's job held; 0 where it cannot be told (the job is not counted)."""
    try:
        return count(study)
    except (OSError, ValueError, KeyError):
        return 0


def _old_job_start(study: Path, old: list[dict], device: str) -> float:
    """What a timed job of a study made before the launcher paid to start: its runs' median of (the job's
    logged time less the run's launcher-equivalent time)."""
    runs = {str(Path(p).relative_to(study)): cached_record(p) for p in Layout(str(study)).stored_records()}
    gaps = []
    for job in (job for jobs in walltime.logged_jobs(study) for job in jobs):
        rec = runs.get(job.output)
        if job.rule == "train_run" and job.end is not None and rec and run_cost(rec, device):
            gaps.append(job.end - job.start - run_cost(rec, device) + LAUNCHER_S[device])
    return statistics.median(gaps) if gaps else 0.0
