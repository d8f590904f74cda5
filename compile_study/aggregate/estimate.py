"""How long a study will take: the plan printed before it starts, and the progress line after each run.

    python -m compile_study estimate config.yaml [overlays] --device cuda [--gpus 2]

Every job of the plan is counted, from what earlier studies measured (this study's records and calls, then
those of the stored studies under reference/):
- a run: the mean wall time of earlier records of its kind, the most specific kind with records first
  (configuration, then mode/scope/regime, mode/scope, mode, compiled or not), repeat 0 (a cold compile and the
  evidence) apart from the later repeats (a warm compile, no evidence). A record made before the launcher
  (no `env.launcher`) paid for a job start, an interpreter and its imports that no run pays now: its
  `process_start_s`, `imports_s` and what it left unbooked are replaced by LAUNCHER_S, the launcher's cost.
  A repeat 0 that starts from another mode's GEMM search (config `gemm_search: shared`) is its own kind,
  priced, before such a run was measured, as a cold compiled run of any mode;
- every other job (data, parity, peak, MLP claim, method checks, summary, figures, paper, PDF, READMEs): the
  median time of its rule in earlier calls' Snakemake logs (walltime.py), a timed one logged before the
  launcher less that study's measured cost of a job start; without one, PRIOR_JOB_S. Two jobs grow with
  what they hold (PER_UNIT): the parity job with its checks, the MLP claim with its batch sizes; theirs is
  the median time per check or batch size, times the plan's;
- Snakemake itself: its start (PRIOR_START_S) and its bookkeeping between jobs (PRIOR_PER_JOB_S).
A kind nothing was measured for falls back to PRIOR_RUN_S, and the message says how many did. Torch-free.
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
from compile_study.core import grid, record, vocab
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
               "method_check:timer_check": 60, "method_check:reference_drift": 60, "method_check:concurrency": 60,
               "method_check:launcher": 60}
# Jobs whose time grows with what they hold: rule -> how many units a stored study's job held. The plan
# (plan_jobs) names the units of its own; PRIOR_JOB_S is per unit for these.
PER_UNIT = {
    "parity": lambda study: len(Layout(str(study)).stored_parity()),  # checks, run in the one job
    "mlp_claim": lambda study: len(json.loads(Path(Layout(str(study)).mlp).read_text())["rows"]),  # batch sizes
}
PRIOR_START_S = {"cpu": 6.0, "cuda": 8.0}  # Snakemake's start and DAG (CUDA: torch imported to see the GPU)
PRIOR_PER_JOB_S = 0.3  # Snakemake's bookkeeping between two jobs run in its own threads
TIMED_RULES = ("parity", "measure_peak", "mlp_claim", "method_check")


def rule_of(job: walltime.Job) -> str:
    """A job's rule as the plan counts it: method checks by their check."""
    return f"method_check:{Path(job.output).stem}" if job.rule == "method_check" else job.rule


def _timed(rule: str) -> bool:
    return rule.split(":")[0] in TIMED_RULES
AGGREGATE_RULES = ("summarize", "figures", "paper", "study_readme")


def _class(evidence: bool, mode: str) -> tuple[bool, bool]:
    """(takes evidence and compiles cold, is compiled): repeat 0 against the later repeats."""
    return bool(evidence), mode != "eager"


SHARED = ("search shared", True)  # the class of a repeat 0 that starts from another mode's GEMM search


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


def model_of(model: dict | None) -> tuple:
    """Which model a study or record measured: the built-in one (its sizes aside) or a plug, by name and plug."""
    model = model or {}
    return model.get("name"), model.get("factory"), json.dumps(model.get("hf_config"), sort_keys=True)


def known_runs(patterns: list[str], device: str, model: dict | None = None) -> dict[tuple, list[float]]:
    """Each kind (_levels) -> the launcher-equivalent wall times of the records of that kind, of `model`'s
    studies only (config `model`; None: the built-in model): a plugged model builds and compiles in its own time."""
    out: dict[tuple, list[float]] = defaultdict(list)
    for pattern in patterns:
        for path in glob.glob(pattern, recursive=True):
            rec = _record(path)
            cost = run_cost(rec, device) if rec else None
            if cost is None or model_of(rec["config"].get("model")) != model_of(model):
                continue
            key, cfg = record.RunKey.of(rec["config"]), rec["config"]
            cold = rec["env"].get("inductor_cache") == "cold" and cfg["compile_mode"] != "eager"
            if cold and not cfg.get("evidence"):
                continue  # a later repeat that found no cache (a bare machine): neither kind the plan has
            shared = rec["env"].get("inductor_cache") == vocab.SEARCH_SHARED
            cls = SHARED if shared else _class(cfg.get("evidence", key.repeat == 0), key.compile_mode)
            for level in _levels(key, cls):
                out[level].append(cost)
    return out


def plan_records(layout: Layout, references: str = "reference") -> list[str]:
    """Where the estimate finds the records it learns from: this study's and the stored studies'."""
    return [layout.records_glob, f"{references}/*/runs/**/r*.json"]


def run_seconds(key: record.RunKey, device: str, known: dict, shared: bool = False) -> tuple[float, bool]:
    """-> (estimated seconds of one run, whether it came from records). `shared`: a repeat 0 that starts from
    another mode's GEMM search (grid.shared_search): priced by such runs, else as a cold compiled run."""
    cls = _class(key.repeat == 0, key.compile_mode)
    levels = _levels(key, SHARED) + [("compiled", cls)] if shared else _levels(key, cls)
    for level in levels:
        if known.get(level):
            return statistics.mean(known[level]), True
    prior = PRIOR_RUN_S[device][cls[0]]
    return prior.get(key.compile_mode, prior.get("compiled" if cls[1] else "eager", 60)), False


def _shared(runs: dict, key: record.RunKey) -> bool:
    """Whether the plan's run `key` starts from another mode's GEMM search (grid.expand's `search_from`)."""
    return grid.search_from(runs, key) is not None


def known_jobs(studies: list[Path], device: str, model: dict | None = None) -> dict[str, list[float]]:
    """Rule -> seconds its jobs took in the logged calls of `model`'s studies (timed ones as under the launcher)."""
    out: dict[str, list[float]] = defaultdict(list)
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
            for job in walltime.jobs_of(log.read_text(), walltime._utc(call["start_utc"])):
                held = units.get(job.rule, 1)
                if job.end is not None and job.rule != "train_run" and held:
                    cut = start if _timed(job.rule) else 0.0
                    out[rule_of(job)].append(max(0.0, job.end - job.start - cut) / held)
    return out


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
    """Rule (method checks: by check) -> what each job of a whole study holds, the runs apart: 1 (one job), 0
    (none), or for a PER_UNIT rule its units: `parity` checks (rule parity runs them all in one job), the MLP
    claim's `mlp_sizes` batch sizes."""
    pdf = shutil.which("latexmk") is not None if pdf is None else pdf
    return {"prepare_data": 1, "study_config": 1, "study_facts": 1, "parity": parity, "measure_peak": 1,
            "mlp_claim": mlp_sizes, "summarize": 1, "figures": 1, "paper": 1, "paper_pdf": int(pdf),
            "study_readme": 1} | {f"method_check:{name}": 1 for name in checks}


def config_jobs(config: dict, runs: dict, device: str, pdf: bool | None = None) -> dict[str, int]:
    """plan_jobs of a whole study of `config` on `device` (`runs`: its grid, expanded)."""
    return plan_jobs(len(grid.parity_pairs(runs)), (config.get("checks") or {}).get(device, []), pdf,
                     mlp_sizes(config, device))


def mlp_sizes(config: dict, device: str) -> int:
    """The MLP claim's batch sizes on `device` in a config (its job's units)."""
    return len(((config.get("claims") or {}).get("mlp") or {}).get(device, {}).get("batch_sizes", [64]))


def estimate(runs: dict, layout: Layout, device: str, jobs: dict[str, int] | None = None, gpus: int = 1,
             references: str = "reference", model: dict | None = None) -> dict:
    """The plan's runs to do and its other jobs -> seconds by part, and how many runs came from records of the
    same model (config `model`)."""
    studies = sorted(Path(p).parent for p in glob.glob(f"{references}/*/calls.jsonl"))
    known = known_runs(plan_records(layout, references), device, model)
    todo = [key for key in runs if not Path(layout.record(key)).exists()]
    per_run = [run_seconds(key, device, known, _shared(runs, key)) for key in todo]
    logged = known_jobs(studies, device, model)
    jobs = jobs if jobs is not None else plan_jobs(0, [])
    other = {rule: n * (statistics.median(logged[rule]) if logged.get(rule) else PRIOR_JOB_S.get(rule, 60))
             for rule, n in jobs.items() if n}
    if "method_check:concurrency" in other and gpus < 2 and not logged.get("method_check:concurrency"):
        other["method_check:concurrency"] = PRIOR_JOB_S["measure_peak"]  # one GPU: it only says it does not apply
    timed = sum(s for s, _ in per_run) + sum(v for r, v in other.items() if _timed(r))
    rest = sum(v for r, v in other.items() if not _timed(r))
    snakemake = PRIOR_START_S[device] + PRIOR_PER_JOB_S * (len(todo) + sum(1 for n in jobs.values() if n))
    seconds = timed / max(gpus, 1) + rest + snakemake
    return {"total": len(runs), "todo": len(todo), "measured": sum(m for _, m in per_run),
            "runs_s": sum(s for s, _ in per_run), "other_s": other, "snakemake_s": snakemake, "seconds": seconds}


def plan_message(runs: dict, layout: Layout, device: str, gpus: int = 1, jobs: dict | None = None,
                 model: dict | None = None) -> str:
    """One line: runs to do and the whole plan's estimated wall time (walltime.plan_seconds reads it back)."""
    e = estimate(runs, layout, device, jobs, gpus, model=model)
    source = f"{e['measured']} of {e['todo']} runs from earlier records" if e["measured"] else "per-mode priors"
    where = (f"on {gpus} GPUs with --resources timed_run={gpus}" if device == "cuda" and gpus > 1
             else "on one GPU" if device == "cuda" else "on the CPU")
    return (f"study plan: {e['todo']} of {e['total']} runs to do, about {e['seconds'] / 60:.1f} min {where} "
            f"({e['seconds']:.0f} s in all: runs {e['runs_s']:.0f} s, other jobs {sum(e['other_s'].values()):.0f} s, "
            f"Snakemake {e['snakemake_s']:.0f} s; runs estimated from {source})")


def progress_message(runs: dict, layout: Layout, device: str, gpus: int = 1, model: dict | None = None) -> str:
    """`runs done / total` and the estimate of what is left, scaled by how this study's runs compare with it."""
    done = [key for key in runs if Path(layout.record(key)).exists()]
    known = known_runs(["reference/*/runs/**/r*.json"], device, model)
    measured = [(_record(layout.record(key)), run_seconds(key, device, known, _shared(runs, key))[0]) for key in done]
    actual = [(run_cost(rec, device), guess) for rec, guess in measured if rec and run_cost(rec, device)]
    scale = sum(a for a, _ in actual) / sum(g for _, g in actual) if actual else 1.0
    left = sum(run_seconds(key, device, known, _shared(runs, key))[0]
               for key in runs if key not in set(done)) * scale / max(gpus, 1)
    return f"progress: {len(done)}/{len(runs)} runs recorded; runs left: about {left / 60:.1f} min"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Estimate a study's wall time from its grid.")
    parser.add_argument("configs", nargs="+", help="config.yaml, then overlays")
    parser.add_argument("--device", required=True, choices=["cpu", "cuda"])
    parser.add_argument("--gpus", type=int, default=1, help="timed runs at once (one per GPU)")
    args = parser.parse_args(argv)
    config = grid.load_config(args.configs)
    runs = grid.expand(config["grids"][args.device])
    jobs = config_jobs(config, runs, args.device)
    print(plan_message(runs, Layout(f"results/{args.device}"), args.device, args.gpus, jobs, config["model"]))


if __name__ == "__main__":
    main()
