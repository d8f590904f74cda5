"""How long a study will take: the plan printed before it starts, and the progress line after each run.

    python -m compile_study estimate config.yaml [overlays] --device cuda [--gpus 2]

Every job of the plan is counted, from what earlier studies measured (costs.py says how each kind is learned):
- the runs: each run's wall time from its configuration's warm cache. Where a run's load may overlap the timed
  run before it (config `overlap_loads`), only the first load on each lane adds to the wall time: each later
  run's load is hidden by its lane's timed run, up to that run's timed part (runs_wall), in the order the plan
  runs them (schedule.run_order: a long load beside a long timed part);
- the compile phase: its cold compiles and portable starts, `slots` at once, each as much longer than alone as
  the compile_concurrency checks measured, scaled to the plan's compiles at once (at_once.py); a GEMM search runs
  alone, after or before them (phase_seconds);
- every other job (data, parity, peak, MLP claim, method checks, summary, figures, paper, PDF, READMEs, the
  reproduction report): the median time of its rule's logged jobs, per unit for the parity job and the MLP
  claim; a rule that runs on the host alone (HOST_RULES) from another device's studies where this device's
  logged none (the 2-core CPU study's PDF for a GPU study: an upper bound); without one, PRIOR_JOB_S;
- Snakemake itself: its start, its exit and its bookkeeping per job, from the stored studies' logged calls
  (snakemake_time.py; its priors where none is logged).
A kind nothing was measured for falls back to the priors (PRIOR_RUN_S, PRIOR_COMPILE_S), and the message says
how many runs came from records. Torch-free.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
from pathlib import Path

from compile_study.aggregate.estimate import costs, schedule, snakemake_time
from compile_study.aggregate.estimate.at_once import AT_ONCE, MEASURED_DIR, factor_at
from compile_study.aggregate.estimate.at_once import checks as at_once_checks
from compile_study.core import record, vocab
from compile_study.core.config import grid
from compile_study.core.errors import count
from compile_study.core.layout import STORED, Layout, study_root
from compile_study.measure.checks.spec import config_problems, method_checks
from compile_study.measure.process import isolation

# Seconds, where nothing was measured yet; each says where it comes from.
# A run of a kind never measured, by whether it takes the evidence (repeat 0) and whether it is compiled: first
# H200 runs (imports taken out) and 2-core CPU runs, from a warm cache (the compile phase compiled it).
PRIOR_RUN_S = {"cuda": {True: {"eager": 8}, False: {"eager": 5, "compiled": 6}},
               "cpu": {True: {"eager": 8}, False: {"eager": 5, "compiled": 15}}}
# Other jobs, by rule: 2-core CPU measurements of this project (2026-12-01), used for a GPU host too where its
# own logs have none (its CPU is faster: an upper bound); a PER_UNIT rule's per unit (the timer check's two CPU
# cases took 60 s).
PRIOR_JOB_S = {"prepare_data": 25, "study_config": 1, "study_facts": 1, "parity": 20, "measure_peak": 3,
               "mlp_claim": 20, "summarize": 8, "figures": 12, "paper": 6, "paper_pdf": 15, "study_readme": 4,
               "check_model": 5, "reproduction": 5} | {  # a method check's, per unit, from its CHECK
    f"method_check:{c.name}": c.prior_s for c in method_checks().values()}
# A cold compile of a kind never measured: the study's own cold runs (2026-12-02 H200 reference: 17-22 s a
# configuration, 208 s a GEMM search; 2-core CPU: about 50 s). A portable start never measured: on an H200 (torch
# 2.11, outside the study) 2.2-2.8 s to the first step from the loaded artifacts, plus a compile job's fixed cost;
# on 2 CPU cores (torch 2.13) the C++ kernels are compiled again: about as long as a cold compile. Where its
# configuration's cold compiles and warm runs have records, a GPU portable start is priced from them instead: the
# compile job's cost besides its compile, and the runs' warm-cache load times PORTABLE_OVER_WARM (on that H200 the
# artifacts loaded into an empty cache took 2.6, 2.2, 2.8 s to the first step, the same local cache warm 1.8-2.5 s:
# 2.53 / 2.15).
PORTABLE_OVER_WARM = {"cuda": 2.53 / 2.15}
# By kind: "searching" is every mode of vocab.AUTOTUNE_MODES that searches its own GEMMs (prior_kind), so that a
# new searching mode is priced as one.
PRIOR_COMPILE_S = {"cuda": {"compiled": 25, "searching": 210, "portable": 8},
                   "cpu": {"compiled": 60, "searching": 200, "portable": 50}}
COMPILE_RULES = ("parity",)  # jobs of the compile phase beside the cold compiles (a compile slot each)


# Rules that use the host alone (no device, no timing): a job of one takes about as long on any study's host.
HOST_RULES = ("prepare_data", "study_config", "study_facts", "summarize", "figures", "paper", "paper_pdf",
              "study_readme", "reproduction")


def run_seconds(key: record.RunKey, device: str, known: dict) -> tuple[float, bool]:
    """-> (estimated seconds of one run, from its warm cache; whether it came from records)."""
    cls = costs.run_class(key.repeat == 0, key.compile_mode)
    levels = costs.levels(key, cls)
    rest = next((statistics.mean(known[lv]) for lv in levels if known.get(lv)), None)
    load = next((statistics.mean(known[("warm", lv[:-1])]) for lv in levels if known.get(("warm", lv[:-1]))), 0.0)
    if rest is not None:
        return rest + load, True
    prior = PRIOR_RUN_S[device]
    return prior[False]["compiled" if cls[1] else "eager"] + (
        prior[True]["eager"] - prior[False]["eager"] if cls[0] else 0.0), False


# A run's load besides its warm-cache load where no record says (process, CUDA, data, model): on an H200 (outside
# the study) a forked eager child took 1.3 s in all with its first steps; a 2-core CPU run's fixed cost is 0.3-3.4 s.
PRIOR_LOAD_S = {"cuda": 1.0, "cpu": 0.5}


def load_seconds(key: record.RunKey, device: str, known: dict) -> float:
    """The estimated seconds of one run's load phase (costs.load_cost, plus its warm-cache load), at most the run's."""
    levels = costs.levels(key, costs.run_class(key.repeat == 0, key.compile_mode))
    fixed = next((statistics.mean(known[("load", lv[:-1])]) for lv in levels if known.get(("load", lv[:-1]))),
                 PRIOR_LOAD_S[device])
    return min(fixed + (warm_seconds(key, known) or 0.0), run_seconds(key, device, known)[0])


def runs_wall(runs: list[tuple[float, float]], overlap: bool, lanes: int = 1) -> float:
    """The wall time of `runs` ((seconds, of them its load) each, in the order they run), dealt in turn to `lanes`
    lanes (GPUs) that run at once: one after another on each lane; where loads overlap timed work, each run's load
    but its lane's first runs beside the timed part before it, and adds only what it takes beyond that part."""
    lanes = max(lanes, 1)
    if not overlap:
        return sum(total for total, _ in runs) / lanes
    wall = 0.0
    for lane in range(lanes):
        mine = runs[lane::lanes]
        timed = [total - load for total, load in mine]
        wall += (mine[0][1] if mine else 0.0) + sum(
            max(t, nxt[1]) for t, nxt in zip(timed, mine[1:])) + (timed[-1] if mine else 0.0)
    return wall / lanes


def ordered_wall(runs: list[tuple[float, float]], overlap: bool, lanes: int = 1) -> float:
    """runs_wall of `runs` in the order the plan runs them where loads overlap timed work (schedule.run_order)."""
    order = schedule.run_order(runs, lanes) if overlap else range(len(runs))
    return runs_wall([runs[i] for i in order], overlap, lanes)


def warm_seconds(key: record.RunKey, known: dict) -> float | None:
    """A run's warm-cache load (its compile, the cache filled) from the runs' records of its kind, None where none."""
    levels = costs.levels(key, costs.run_class(key.repeat == 0, key.compile_mode))
    return next((statistics.mean(known[("warm", lv[:-1])]) for lv in levels if known.get(("warm", lv[:-1]))), None)


def compile_seconds(key: record.RunKey, device: str, known: dict, search: str | None = None,
                    warm: float | None = None) -> float:
    """A cold compile's estimated seconds, alone. `search`: "own" for a max-autotune mode's GEMM search, "shared"
    for one that starts from another's; "portable" prices a portable start instead (`warm`: its configuration's
    warm-cache load in a run, warm_seconds, used where no portable start of its kind was recorded)."""
    cls = (search,) if search in ("shared", "portable") else ("cold",)
    for level in costs.levels(key.with_repeat(0), cls):
        if known.get(level):
            return statistics.mean(known[level])
    prior = PRIOR_COMPILE_S[device]
    if search == "portable":
        fixed = next((statistics.mean(known[lv]) for lv in costs.levels(key.with_repeat(0), ("fixed",))
                      if known.get(lv)), None)
        ratio = PORTABLE_OVER_WARM.get(device)
        return fixed + ratio * warm if None not in (fixed, ratio, warm) else prior["portable"]
    return prior[prior_kind(key.compile_mode, search)]


def prior_kind(mode: str, search: str | None) -> str:
    """A cold compile's kind among PRIOR_COMPILE_S's: a mode of vocab.AUTOTUNE_MODES searching its own GEMMs is
    "searching"; every other compile (one that starts from another's search too) "compiled"."""
    return "searching" if search == "own" and mode in vocab.AUTOTUNE_MODES else "compiled"


def phase_seconds(at_once: list[float], alone: list[float], slots: int, factor: float = AT_ONCE) -> float:
    """The compile phase's wall time: the `at_once` jobs (cold compiles, parity checks), longest first, each to the
    slot free first, each `factor` times as long as alone (at_once.factor_at; the last slot to finish ends them);
    then the `alone` ones (GEMM searches) one by one."""
    ends = [0.0] * max(slots, 1)
    for seconds in sorted(at_once, reverse=True):
        ends[ends.index(min(ends))] += seconds * (factor if slots > 1 else 1.0)
    return max(ends) + sum(alone)


def logged_jobs(studies: list[Path], device: str, model: dict | None = None) -> dict[str, list[float]]:
    """Rule -> its logged jobs' seconds (costs.known_jobs) on `device`, and for a rule of HOST_RULES that no study
    of `device` logged, another device's."""
    logged = costs.known_jobs(studies, device, model)
    for other in sorted({"cpu", "cuda"} - {device}):
        theirs = costs.known_jobs(studies, other, model)
        logged |= {rule: theirs[rule] for rule in HOST_RULES if not logged.get(rule) and theirs.get(rule)}
    return logged


def job_seconds(rule: str, logged: dict[str, list[float]], units: int = 1) -> float:
    """A job's estimated seconds (rule as rule_of names it, the MLP claim as costs.mlp_rule; `logged`:
    known_jobs): the median of its rule's logged jobs, else PRIOR_JOB_S; a PER_UNIT rule's times its `units`. An
    MLP claim of batch sizes some study ran is that study's whole job; of others, the claim's per size."""
    base = rule.split(":")[0]
    if base == "mlp_claim" and rule != base:
        return statistics.median(logged[rule]) if logged.get(rule) else job_seconds(base, logged, units)
    return units * (statistics.median(logged[rule]) if logged.get(rule) else PRIOR_JOB_S.get(rule, 60))


def plan_jobs(parity: int, checks: list[str], pdf: bool | None = None, mlp: list[int] | tuple = (64,),
              reproduction: int = 0, device: str = "cuda") -> dict[str, int]:
    """Rule (method checks: by check; the MLP claim: by its batch sizes, costs.mlp_rule) -> how many jobs of it a
    whole study on `device` has, the runs and cold compiles apart, or for a PER_UNIT rule its units: `parity`
    checks (a job each), the MLP claim's batch sizes `mlp`, the timer check's cases, the reproduction report where
    a yardstick is named."""
    pdf = shutil.which("latexmk") is not None if pdf is None else pdf
    return {"prepare_data": 1, "study_config": 1, "study_facts": 1, "check_model": 1, "parity": parity,
            "measure_peak": 1, costs.mlp_rule(mlp): len(mlp), "summarize": 1, "figures": 1, "paper": 1,
            "paper_pdf": int(pdf), "study_readme": 1, "reproduction": reproduction} | {
            f"method_check:{name}": check_units(name, device) for name in checks}


def check_units(name: str, device: str) -> int:
    """A method check's units (costs.PER_UNIT): its CHECK's cases on `device`, one where it has none."""
    check = method_checks().get(name)
    return check.units(device) if check else 1


def config_jobs(config: dict, runs: dict, device: str, pdf: bool | None = None) -> dict[str, int]:
    """plan_jobs of a whole study of `config` on `device` (`runs`: its grid, expanded)."""
    return plan_jobs(len(grid.parity_pairs(runs)), (config.get("checks") or {}).get(device, []), pdf,
                     mlp_sizes(config, device), int(bool((config.get("yardstick") or {}).get(device))), device)


def mlp_sizes(config: dict, device: str) -> list[int]:
    """The MLP claim's batch sizes on `device` in a config (its job's units)."""
    return list(((config.get("claims") or {}).get("mlp") or {}).get(device, {}).get("batch_sizes", [64]))


def search_kind(c: dict) -> str | None:
    """How a planned cold compile searches the GEMMs (compile_seconds `search`)."""
    return "own" if c["alone"] else "shared" if c["search_from"] is not None else None


def compiles_todo(compiles: dict, layout: Layout) -> list[tuple[record.RunKey, dict]]:
    """The plan's cold compiles (core/config/grid.py compiles) whose records are not there yet: (key, its plan) each."""
    return [(key, c) for key, c in compiles.items() for i in range(c["n"])
            if not Path(layout.compile_record(key, i)).exists()]


def portable_todo(compiles: dict, layout: Layout) -> list[record.RunKey]:
    """The plan's portable starts whose records are not there yet: their configuration's key each."""
    return [key for key, c in compiles.items() for i in range(c.get("portable", 0))
            if not Path(layout.portable_record(key, i)).exists()]


def estimate(runs: dict, layout: Layout, device: str, jobs: dict[str, int] | None = None, gpus: int = 1,
             references: str = STORED, model: dict | None = None, compiles: dict | None = None,
             slots: int = 1, overlap: bool = False) -> dict:
    """The plan's cold compiles (`compiles`: core/config/grid.py compiles, `slots` at once), runs and other jobs still to
    do -> seconds by part (`hidden_s`: the runs' loads hidden beside timed runs where loads overlap them), and how
    many runs came from records of the same model (config `model`)."""
    studies = costs.stored_studies(references)
    known = costs.known_runs(costs.plan_records(layout, references), device, model)
    todo = [key for key in runs if not Path(layout.record(key)).exists()]
    per_run = [run_seconds(key, device, known) for key in todo]
    logged = logged_jobs(studies, device, model)
    jobs = jobs if jobs is not None else plan_jobs(0, [])
    other = {rule: job_seconds(rule, logged, n) for rule, n in jobs.items() if n}
    if "method_check:concurrency" in other and gpus < 2 and not logged.get("method_check:concurrency"):
        other["method_check:concurrency"] = PRIOR_JOB_S["measure_peak"]  # one GPU: it only says it does not apply
    measured = at_once_checks(references, device, kept=MEASURED_DIR)
    known_c = costs.known_compiles(costs.plan_compiles(layout, references), device, model,
                                   lambda k: factor_at(k, measured))
    if "method_check:compile_concurrency" in other:  # its cell compiled cold, alone, one after another
        from compile_study.measure.checks.compile_concurrency import CELLS, N_ALONE  # torch-free

        mode, batch, precision = CELLS[device]
        cell = record.RunKey(mode, "module", batch, "static", precision, 0)
        other["method_check:compile_concurrency"] = N_ALONE * compile_seconds(cell, device, known_c)
    cold = [(c, compile_seconds(key, device, known_c, search_kind(c))) for key, c in compiles_todo(compiles or {}, layout)]
    portable = [compile_seconds(key, device, known_c, "portable", warm_seconds(key.with_repeat(1), known))
                for key in portable_todo(compiles or {}, layout)]
    parity = [other.pop("parity") / jobs["parity"]] * jobs["parity"] if "parity" in other else []
    together = [s for c, s in cold if not c["alone"]] + portable + parity
    factor = factor_at(min(slots, len(together)), measured)  # as many at once as the plan runs
    phase = phase_seconds(together, [s for c, s in cold if c["alone"]], slots, factor)
    runs_s = sum(s for s, _ in per_run)
    loaded = [(s, load_seconds(key, device, known)) for key, (s, _) in zip(todo, per_run)]
    hidden = runs_s / max(gpus, 1) - ordered_wall(loaded, overlap, gpus)
    timed = runs_s + sum(v for r, v in other.items() if costs.timed_rule(r))
    rest = sum(v for r, v in other.items() if not costs.timed_rule(r))
    # the floor (walltime.floor): what must hold the device alone, so that no schedule is shorter: the runs less
    # their loads, the timed jobs (method checks, peak, claim) and the compiles that run alone (a GEMM search)
    floor = (timed - sum(load for _, load in loaded)) / max(gpus, 1) + sum(s for c, s in cold if c["alone"])
    own = snakemake_time.learned(studies, device, model)
    snakemake = own.seconds(len(todo) + len(cold) + len(portable) + sum(jobs.values()))
    seconds = phase + timed / max(gpus, 1) - hidden + rest + snakemake
    return {"total": len(runs), "todo": len(todo), "measured": sum(m for _, m in per_run), "compiles": len(cold),
            "portable": len(portable), "compile_s": phase, "runs_s": runs_s, "hidden_s": hidden, "other_s": other,
            "snakemake_s": snakemake, "seconds": seconds, "floor_s": floor}


def plan_message(runs: dict, layout: Layout, device: str, gpus: int = 1, jobs: dict | None = None,
                 model: dict | None = None, compiles: dict | None = None, slots: int = 1, overlap: bool = False) -> str:
    """One line: runs to do and the whole plan's estimated wall time (walltime.plan_seconds reads it back)."""
    return message(estimate(runs, layout, device, jobs, gpus, model=model, compiles=compiles, slots=slots,
                            overlap=overlap), device, gpus, slots)


def message(e: dict, device: str, gpus: int, slots: int) -> str:
    """The plan line of an estimate (estimate's parts)."""
    source = f"{e['measured']} of {e['todo']} runs from earlier records" if e["measured"] else "per-mode priors"
    where = (f"on {gpus} GPUs with --resources timed_run={gpus}" if device == "cuda" and gpus > 1
             else "on one GPU" if device == "cuda" else "on the CPU")
    portable = f", {e['portable']} portable starts" if e.get("portable") else ""
    hidden = f" ({e['hidden_s']:.0f} s of their loads beside timed runs)" if e.get("hidden_s") else ""
    return (f"study plan: {e['compiles']} cold compiles{portable} and {e['todo']} of {e['total']} runs to do, about "
            f"{e['seconds'] / 60:.1f} min {where} ({e['seconds']:.0f} s in all: compile phase {e['compile_s']:.0f} s "
            f"({slots} at once), runs {e['runs_s']:.0f} s{hidden}, other jobs {sum(e['other_s'].values()):.0f} s, Snakemake "
            f"{e['snakemake_s']:.0f} s; floor {e['floor_s']:.0f} s, the parts that hold the device alone; runs "
            f"estimated from {source})")


def progress_message(runs: dict, layout: Layout, device: str, gpus: int = 1, model: dict | None = None,
                     compiles: dict | None = None, overlap: bool = False) -> str:
    """Cold compiles and runs done / planned, and the estimate of the runs left (runs_wall), scaled by how this
    study's runs compare with it."""
    done = [key for key in runs if Path(layout.record(key)).exists()]
    known = costs.known_runs([Layout(f"{STORED}/*").records_glob], device, model)
    measured = [(costs.cached_record(layout.record(key)), run_seconds(key, device, known)[0]) for key in done]
    actual = [(costs.run_cost(rec, device), guess) for rec, guess in measured if rec and costs.run_cost(rec, device)]
    scale = sum(a for a, _ in actual) / sum(g for _, g in actual) if actual else 1.0
    left = scale * ordered_wall([(run_seconds(key, device, known)[0], load_seconds(key, device, known))
                                 for key in runs if key not in set(done)], overlap, gpus)
    planned = sum(c["n"] for c in (compiles or {}).values())
    cold = f"{planned - len(compiles_todo(compiles or {}, layout))}/{planned} cold compiles, " if planned else ""
    return f"progress: {cold}{len(done)}/{len(runs)} runs recorded; runs left: about {left / 60:.1f} min"


# The host a study of each device is planned for where none is named: the lent H200 hosts' 16 cores; a CPU study
# on the machine at hand.
HOST_CORES = {"cuda": 16}


def config_estimate(config: dict, device: str, layout: Layout, gpus: int = 1, cores: int | None = None,
                    references: str = STORED, pdf: bool | None = None) -> tuple[dict, int]:
    """The estimate of a whole study of a (validated) config -> (estimate's parts, compile slots): its grid, its
    compile phase (`cores` / compile_phase.cores_per_compile at once), its runs (their loads beside timed runs
    where config overlap_loads lets them, for `cores` / `gpus` cores a GPU) and every other job."""
    runs = grid.expand(config["grids"][device])
    phase = config["compile_phase"][device]
    cores = cores or HOST_CORES.get(device) or len(os.sched_getaffinity(0))
    slots = max(1, cores // phase["cores_per_compile"])
    overlap = isolation.overlaps(config.get("overlap_loads", "auto"), device, cores // max(gpus, 1))
    e = estimate(runs, layout, device, config_jobs(config, runs, device, pdf), gpus, references, config["model"],
                 grid.compiles(runs, phase["n_cold"], phase["n_portable"]), slots, overlap)
    return e, slots


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Estimate a study's wall time from its grid.")
    parser.add_argument("configs", nargs="+", help="config.yaml, then overlays")
    parser.add_argument("--device", required=True, choices=["cpu", "cuda"])
    parser.add_argument("--gpus", type=count(65536), default=1, help="timed runs at once (one per GPU)")
    parser.add_argument("--cores", type=count(65536), default=None,
                        help="the study host's cores (default: 16 for cuda, as the H200 hosts; this machine's for cpu)")
    args = parser.parse_args(argv)
    config = grid.load_config(args.configs, more=config_problems)  # a check the workflow would refuse, too
    e, slots = config_estimate(config, args.device, Layout(study_root(args.device, config.get("model"))), args.gpus, args.cores)
    print(message(e, args.device, args.gpus, slots))


if __name__ == "__main__":
    main()
