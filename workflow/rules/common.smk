# Helpers shared by the rules: config validation, the study's layout, the device's grid, file names.
#
# A live study (the project directory) runs its grid into results/<device>/; a stored study (a directory
# with config.yaml and runs/, e.g. `snakemake --cores all --directory reference/<name>`) has its runs done,
# and only the aggregate rules (summary, figures, paper) run, with the same layout (compile_study/core/layout.py).
import functools
import os
import shutil
import sys

from snakemake.logging import logger
from snakemake.utils import validate

from compile_study.core import (
    config_check,
    damaged,
    data_check,
    grid,
    resume,
    study_lock,
    vocab,
)
from compile_study.aggregate.estimate import (
    known_runs,
    mlp_sizes,
    plan_jobs,
    plan_message,
    plan_records,
    progress_message,
    run_seconds,
)
from compile_study.checks import launcher as launcher_check
from compile_study.measure import jobs, launch
from compile_study.measure.isolation import count_gpus
from compile_study.core.layout import (
    CHECKS,
    Layout,
    is_stored_study,
    model_difference,
    same_study,
    stored_device,
    study_root,
    yardstick_problem,
)
from compile_study.core.record import RunKey

STORED = is_stored_study(".")
SCHEMA = os.path.join(workflow.basedir, "workflow/schemas/config.schema.yaml")


def resolve_device():
    """The device whose grid runs: config `device`, or cuda when torch sees a GPU (asked only where nvidia-smi
    lists one: importing torch would cost this process seconds)."""
    if config["device"] != "auto":
        return config["device"]
    if count_gpus() == 0:
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


_device_errors = []
if STORED:
    validate(
        config, schema="../schemas/config.schema.yaml"
    )  # fills in keys added since it ran
    L = Layout(".", logs=".snakemake/rebuild-logs")
    # its runs cannot be redone: a damaged record is named with the fix
    _damaged = damaged.stored_problems(L.stored_records())
    if _damaged:
        sys.exit(_damaged)
    DEVICE = stored_device(L.stored_records())
else:
    # Bad config fails here, before any job, with one readable message and no traceback.
    # Each error is reported under the file (or --config) that set the bad value.
    _sources = config_check.config_sources(workflow)
    _errors = config_check.schema_errors(config, SCHEMA)
    if _errors:
        sys.exit(config_check.format_errors(_errors, _sources))
    validate(config, schema="../schemas/config.schema.yaml")  # fills in the defaults
    DEVICE = resolve_device()  # the semantic checks concern the grid about to run
    _errors = config_check.semantic_errors(config, devices=[DEVICE])
    if _errors:
        sys.exit(config_check.format_errors(_errors, _sources))
    # device: cuda without a GPU: a dry run still plans the GPU study; a run stops before its first job.
    _device_errors = config_check.device_errors(config)
    config_check.warn_before_start(_device_errors)
    config_check.warn(config_check.data_warnings(config["data"]), _sources)
    # results/<device>, or results/<device>-<name> for a named or plugged model (its logs and caches alike)
    _ROOT = study_root(DEVICE, config["model"])
    L = Layout(_ROOT, logs=f"logs/{os.path.basename(_ROOT)}")
    if (
        workflow.is_main_process
    ):  # before the DAG: Snakemake would rerun what an interrupt marked incomplete
        resume.keep_complete_outputs(L)

DATA_DIR = "resources/data"
DATA_FILES = [
    f"{DATA_DIR}/{split}_{part}.npy"
    for split in ("train", "eval")
    for part in ("ids", "lengths", "labels")
] + [f"{DATA_DIR}/tokenizer.json", f"{DATA_DIR}/facts.json"]
TEMPLATES = os.path.join(workflow.basedir, "paper", "templates")
RUNS = (
    {} if STORED else grid.expand(config["grids"][DEVICE])
)  # run key -> its sub-grid's step settings
CHECKS_ON = [] if STORED else config["checks"].get(DEVICE, [])
# A timed job's threads: its share of the cores when several GPUs run timed jobs at once
# (`--resources timed_run=N`; each job pins itself to a disjoint share, compile_study/measure/isolation.py).
GPUS = count_gpus() if DEVICE == "cuda" and not STORED else 1
TIMED_THREADS = max(1, workflow.cores // max(1, GPUS))


wildcard_constraints:
    **vocab.wildcard_constraints(),


def run_records(wildcards=None):
    return L.stored_records() if STORED else [L.record(key) for key in RUNS]


def study_targets():
    """Every file of the study, the inputs of the target `all`. Snakemake checks only a target's own inputs for
    a file that is gone (not the files between them and the jobs that made them), so a deleted record, summary
    or figure is made again only if `all` names it."""
    made = [L.summary, L.parity_table, L.claims, L.environment, L.figures]
    return paper_targets() + made + list(summary_inputs())


def summary_inputs(wildcards=None):
    """Every file the summary is made from -> its run key (None: JSON that is not a run record)."""
    stored = L.stored_records() if STORED else []
    records = {L.record(key): key for key in RUNS} | {p: None for p in stored}
    others = parity_records() + list(optional_inputs().values()) + [L.facts]
    return records | {p: None for p in others}


def parity_records(wildcards=None):
    """One parity check per compiled mode and precision that the device's grid runs."""
    if STORED:
        return L.stored_parity()
    return [
        L.parity_pattern.format(precision=p, compile_mode=m)
        for p, m in grid.parity_pairs(RUNS)
    ]


def parity_cell(precision, compile_mode):
    """The grid's first static `module` cell of this mode and precision (smallest batch), or None: the parity
    check runs at its batch size on its Inductor cache, after its runs, so that it reuses that cell's
    compilation (max-autotune's GEMM search above all) instead of paying for another."""
    cells = [
        k
        for k in RUNS
        if k.compile_mode == compile_mode
        and k.compile_scope == "module"
        and k.shape_regime == "static"
        and k.precision == precision
        and k.repeat == 0
    ]
    return min(cells, key=lambda k: k.batch_size, default=None)


def parity_inputs(wildcards=None):
    """The prepared data and, for each check whose mode and precision has a cell (parity_cell), its last record."""
    cells = [
        c
        for c in (parity_cell(p, m) for p, m in grid.parity_pairs(RUNS))
        if c is not None
    ]
    last = lambda cell: max(k.repeat for k in RUNS if k.same_configuration(cell))
    return {
        "data": DATA_FILES,
        "model": L.model,
        "cells": [L.record(cell.with_repeat(last(cell))) for cell in cells],
    }


def parity_checks(wildcards=None):
    """Each parity check: its arguments (compile_study/checks/parity.py `job`), output, log and Inductor cache
    (its cell's, else one of its own), at its cell's batch size where the grid has one.
    """
    checks = []
    for precision, mode in grid.parity_pairs(RUNS):
        cell = parity_cell(precision, mode)
        settings = dict(config["parity"][DEVICE])
        settings |= {"batch_size": cell.batch_size} if cell else {}
        kwargs = {"data_dir": DATA_DIR, "model": config["model"], "compile_mode": mode,
                  "precision": precision, "device": DEVICE, "settings": settings}  # fmt: skip
        cache = (
            cache_dir_of(cell) if cell else f"{CACHE_ROOT}/parity-{precision}-{mode}"
        )
        checks.append({"kwargs": kwargs, "cache_dir": cache,
                       "output": L.parity_pattern.format(precision=precision, compile_mode=mode),
                       "log": L.log(f"parity/{precision}/{mode}")})  # fmt: skip
    return checks


def mlp_job(wildcards=None):
    """The MLP claim's arguments (compile_study/checks/mlp_claim.py `job`)."""
    claim = config["claims"]["mlp"][DEVICE]
    return {
        "batch_sizes": claim["batch_sizes"],
        "device": DEVICE,
        "steps": claim.get("steps", 100),
        "repeats": claim.get("repeats", 5),
        "seed": claim.get("seed", 0),
    }


# What the timed jobs' processes run (measure/jobs.py starts them through the launcher).
PARITY = "compile_study.checks.parity:job"
PEAK = "compile_study.checks.peak:job"
MLP = "compile_study.checks.mlp_claim:job"


def planned_jobs():
    """Rule -> jobs whose outputs are missing (the runs apart), for the estimate."""
    missing = lambda paths: sum(not os.path.exists(p) for p in paths)
    checks = [c for c in CHECKS_ON if not os.path.exists(L.check(c))]
    jobs = plan_jobs(missing(parity_records()), checks, bool(shutil.which("latexmk")))
    return jobs | {
        "prepare_data": missing(DATA_FILES[-1:]),
        "measure_peak": missing([L.peak]),
        "mlp_claim": missing([L.mlp]) * mlp_sizes(config, DEVICE),
    }


def method_check(check, out, log, threads):
    """Rule method_check: the launcher check drives processes from here; every other check is a process."""
    if check != "launcher":
        return jobs.check_job(
            check, DATA_DIR, out, config["model"], log, threads, DEVICE
        )
    cell = launcher_cell()
    steps = RUNS.get(cell) or grid.grid_defaults()
    settings = {k: steps[k] for k in grid.STEP_KEYS if k in steps} | config["train"]
    cache = cache_dir_of(cell) if cell in RUNS else None
    launcher_check.main(
        DATA_DIR, out, config["model"], DEVICE, settings, log, threads, cache
    )


def launcher_cell():
    mode, batch, precision = launcher_check.CELLS[DEVICE]
    return RunKey(mode, "module", batch, "static", precision, 0)


def check_inputs(wildcards):
    """The data; the launcher check also waits for its cell's runs, so that it runs on their warm cache."""
    cell = launcher_cell() if wildcards.check == "launcher" else None
    if cell not in RUNS:
        return {"data": DATA_FILES, "model": L.model}
    last = max(k.repeat for k in RUNS if k.same_configuration(cell))
    return {
        "data": DATA_FILES,
        "model": L.model,
        "cell": L.record(cell.with_repeat(last)),
    }


def progress():
    """The line each run prints as it ends: runs recorded, and the time left by the estimate."""
    return progress_message(RUNS, L, DEVICE, GPUS, config["model"])


@functools.cache
def _known_runs():
    return known_runs(plan_records(L), DEVICE, config["model"])


def expected_seconds(wildcards):
    """A run's estimated seconds (aggregate/estimate.py), asked by its job only where the call has a time
    limit (core/deadline.py)."""
    key = RunKey.of(wildcards)
    return lambda: run_seconds(
        key, DEVICE, _known_runs(), search_from(key) is not None
    )[0]


def optional_inputs(wildcards=None):
    """Peak, MLP claim and method checks: made by this study's rules, or whatever a stored study has."""
    if not STORED:
        return {"peak": L.peak, "mlp": L.mlp, "model": L.model} | {
            name: L.check(name) for name in CHECKS_ON
        }
    there = {"peak": L.peak, "mlp": L.mlp, "model": L.model} | {
        name: L.check(name) for name in CHECKS
    }
    return {k: v for k, v in there.items() if os.path.exists(v)}


def cold_run_record(wildcards):
    """Repeats after the first wait for it: they reuse the Inductor cache it populated (warm). Repeat 0 of a mode
    that shares another's GEMM search (config `gemm_search: shared`) waits for that search's run.
    """
    key = RunKey.of(wildcards)
    if key.repeat == 0:
        first = search_from(key)
        return [L.record(first)] if first is not None else []
    return L.record(key.with_repeat(0))


def search_from(key):
    """The run whose GEMM search this run's repeat 0 starts from (grid.shared_search), or None."""
    return grid.search_from(RUNS, key)


def shared_search_cache(wildcards):
    """The Inductor cache holding the GEMM search this run starts from (search_from), or None."""
    first = search_from(RunKey.of(wildcards))
    return cache_dir_of(first) if first is not None else None


# One Inductor cache tree per study directory (results/cpu -> resources/inductor_cache/cpu): two models never
# share, or empty, each other's caches.
CACHE_ROOT = f"resources/inductor_cache/{os.path.basename(L.root)}"


def cache_dir_of(key):
    """One Inductor/Triton cache per configuration (its repeats share it: repeat 0 cold, the others warm)."""
    k = key
    return f"{CACHE_ROOT}/{k.shape_regime}-{k.precision}-{k.compile_mode}-{k.compile_scope}-bs{k.batch_size}"


def inductor_cache_dir(wildcards):
    return cache_dir_of(RunKey.of(wildcards))


def run_params(wildcards):
    """The RunConfig fields of one job: its wildcards plus its sub-grid's step settings."""
    key = RunKey.of(wildcards)
    steps = {k: v for k, v in RUNS[key].items() if k not in ("sub_grid", "search_from")}
    # evidence (phase split, profiler, inference) once per configuration: repeat 0
    return key._asdict() | steps | config["train"] | {"evidence": key.repeat == 0}


def test_records(wildcards=None):
    """The study's kept test tiers (tests/<tier>.json, from pytest --tier-record), where there are any."""
    kept = L.stored_test_records()
    return {"tests": kept} if kept else {}


def call_log(wildcards=None):
    """The study's calls.jsonl where it was run through compile_study.core.session."""
    return {"calls": L.calls} if os.path.exists(L.calls) else {}


# Where each call's Snakemake log is kept (core/session.py): a stored study carries its logs beside its records.
CALL_LOGS = "logs" if STORED else L.logs


# How the README names the study's directory in its rebuild command (a stored study: under reference/).
STUDY_DIR = f"reference/{os.path.basename(os.getcwd())}" if STORED else L.root


def yardstick():
    """The stored study this study's speedups are checked against (config `yardstick`, relative to the project
    even for a stored study run with --directory), or None: none configured, this very study, or a study of
    another model (a warning says so). A yardstick that is no stored study, or one of another device type, stops
    the workflow here, before any job.
    """
    path = config["yardstick"][DEVICE]
    if not path:
        return None
    full = os.path.normpath(os.path.join(workflow.basedir, path))
    if same_study(full, L.root):
        return None  # a study against itself (or a copy of it) says nothing
    if STORED and not os.path.exists(full):
        return None  # a stored study outlives the one it was checked against: it keeps that report
    problem = yardstick_problem(full, DEVICE)
    if problem:
        sys.exit(
            f"config yardstick.{DEVICE}: {problem} (set yardstick: {{{DEVICE}: null}} to go without)"
        )
    other = model_difference(full, config["model"])
    if other:  # e.g. a plugged model under the default yardstick: nothing to reproduce
        logger.warning(
            f"config yardstick.{DEVICE}: {path}: {other}; no reproduction report "
            "(python -m compile_study compare-models compares two models' speedups)"
        )
        return None
    return full


YARDSTICK = yardstick()
# Not the synthetic stand-in unseen where the yardstick trained on real text: stopped here, before any job.
if not STORED:
    config_check.refuse(
        data_check.yardstick_refusal(config, DEVICE, YARDSTICK, DATA_DIR)
    )
# How the report names the two studies: the yardstick as configured, the study as its README does.
REPRODUCTION_NAMES = [config["yardstick"][DEVICE], STUDY_DIR]


def yardstick_records(wildcards=None):
    """The yardstick's run records, as paths from the working directory (a stored study's too)."""
    return [os.path.relpath(p) for p in Layout(YARDSTICK).stored_records()]


def reproduction_targets():
    """The study against its yardstick, where one is configured (rule reproduction)."""
    return [L.reproduction("md"), L.reproduction("csv")] if YARDSTICK else []


def reproduction_report(wildcards=None):
    """For the study's README: the report rule reproduction makes, or the one a stored study kept."""
    if YARDSTICK or os.path.exists(L.reproduction("md")):
        return {"reproduction": L.reproduction("md")}
    return {}


def paper_targets():
    """Markdown and LaTeX always; the PDF where latexmk is installed (else the paper_pdf rule is skipped)."""
    targets = [L.paper("md"), L.paper("tex"), L.readme]
    if shutil.which("latexmk"):
        targets.append(L.paper("pdf"))
    else:
        print("paper_pdf: skipped (latexmk is not installed)", file=sys.stderr)
    return targets


def before_start():
    """Before the first job of a real run (not a dry run): refuse a GPU study without a GPU (with a cluster
    executor the jobs run on hosts of their own) and a second invocation on the study (core/study_lock.py),
    remove what shows a run whose record is gone, then print the runs to do and their estimated device time.
    """
    if _device_errors and workflow.local_exec:
        sys.exit(config_check.format_errors(_device_errors, _sources))
    study_lock.hold(".")
    if not STORED:
        remove_stale_views()
        # to Snakemake's log too, where the study's README reads it back beside the call's wall time
        logger.info(
            plan_message(RUNS, L, DEVICE, GPUS, planned_jobs(), config["model"])
        )
        if workflow.local_exec:
            launch.start()  # the warm server's imports overlap data preparation


def remove_stale_views():
    """The summary, figures, papers and README go while a run they show has lost its record (deleted, or set
    aside as damaged): none of them may show it. This run makes them again once the run is redone.
    """
    views, why = damaged.stale_views(L, RUNS)
    for view in views:
        shutil.rmtree(view) if os.path.isdir(view) else os.remove(view)
    if views:
        print(f"{why}: removed {', '.join(views)}, made from them", file=sys.stderr)


def slurm_resources(partition, **request):
    """A job's SLURM request (profiles/slurm reads it; local runs ignore it): site settings from config `cluster`."""
    site = config["cluster"]
    wanted = {"slurm_partition": site[partition], "slurm_account": site["account"]}
    return {k: v for k, v in (wanted | request).items() if v is not None}


# CPU-only stages go to the CPU partition. A timed job takes a whole GPU and cores of its own, so that no
# other job shares its device or its cores (on a CPU grid: the cores alone, on the CPU partition).
CPU_JOB = slurm_resources("cpu_partition")
TIMED_JOB = slurm_resources(
    "gpu_partition" if DEVICE == "cuda" else "cpu_partition",
    cpus_per_task=config["cluster"]["timed_cpus"],
    gpu=1 if DEVICE == "cuda" else None,
    gpu_model=config["cluster"]["gpu_model"] if DEVICE == "cuda" else None,
    constraint=config["cluster"]["constraint"],
)


# A damaged output is set aside before the DAG is built, so that the DAG makes it again (core/damaged.py);
# only here, in the process that plans the study, never in a job's own Snakemake.
if not STORED and workflow.is_main_process:
    for _line in damaged.set_aside(L, summary_inputs()):
        print(_line, file=sys.stderr)
