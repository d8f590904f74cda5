"""The timed jobs of a study's plan: their threads, Snakemake resources and cluster requests, whether a run's
load may overlap the lane's timed run, the arguments of the matmul peak, the MLP claim and the method checks,
and every job's estimated seconds (a part of plan/study.py's Plan, which the rules read as `P`). Torch-free.
"""

from __future__ import annotations

import functools
import os
import shutil

from compile_study.aggregate.estimate import costs, estimate, schedule
from compile_study.measure.checks import targets as check_targets
from compile_study.measure.checks.cells import TIMER_CASES
from compile_study.core.config import grid
from compile_study.core import vocab
from compile_study.core.record import RunKey
from compile_study.measure.process import isolation
from compile_study.measure import jobs


class TimedJobs:
    """Plan's methods for the timed jobs; they read what Plan.__init__ sets (config, device, runs, layout,
    workflow, gpus, timed_threads, data_dir, data_files, checks_on, compiles)."""

    @functools.cached_property
    def overlap(self) -> bool:
        """Whether a run's load may run beside its lane's timed run (config `overlap_loads`, for this host's share
        of the cores per GPU: measure/process/isolation.py overlaps)."""
        return not self.stored and isolation.overlaps(self.config.get("overlap_loads", "auto"), self.device,
                                                      self.timed_threads)

    @property
    def run_threads(self) -> int:
        """A run's threads (Snakemake's count and torch's): the lane's cores, or half of them where loads overlap
        timed work (the timed part on one half, the next run's load on the other), so that two runs fit."""
        return self.timed_threads // 2 if self.overlap else self.timed_threads

    @property
    def run_slots(self) -> int:
        """The `timed_run` slots a run holds: one, or none where loads overlap timed work and the host's lanes
        (measure/process/isolation.py Host) keep each lane to one timed part and one load; the other timed jobs hold one
        and every core of their lane, so no run shares the host with them."""
        return 0 if self.overlap else 1

    @functools.cached_property
    def _run_ranks(self) -> dict[RunKey, int]:
        """Each run's place in the order that hides the most loads (aggregate/estimate/schedule.py run_order), from the
        estimate's seconds of each run and of its load."""
        keys = list(self.runs)
        runs = [(estimate.run_seconds(k, self.device, self._known_runs)[0],
                 estimate.load_seconds(k, self.device, self._known_runs)) for k in keys]
        return {keys[i]: rank for rank, i in enumerate(schedule.run_order(runs, self.gpus))}

    def run_priority(self, wildcards) -> float:
        """A run's Snakemake priority: where loads overlap timed work, by its place in the order (the first 9, the
        last just above 1: below the compile phase's 10, so that a run never goes before a compile that is ready;
        Snakemake starts the ready job of highest priority as a run's cores come free); else 0."""
        if not self.overlap or not self.runs:
            return 0
        return 1 + 8 * (len(self.runs) - self._run_ranks[RunKey.of(wildcards)]) / len(self.runs)

    def peak_job(self, wildcards=None) -> dict:
        """The matmul peak's arguments (measure/checks/peak.py `job`): the precisions the device's grid runs."""
        return {"device": self.device,
                "precisions": [p for p in vocab.PRECISIONS if any(k.precision == p for k in self.runs)]}

    def mlp_job(self, wildcards=None) -> dict:
        """The MLP claim's arguments (measure/checks/mlp_claim.py `job`)."""
        claim = self.config["claims"]["mlp"][self.device]
        return {"batch_sizes": claim["batch_sizes"], "device": self.device, "steps": claim.get("steps", 100),
                "repeats": claim.get("repeats", 5), "proper_steps": claim.get("proper_steps"), "seed": claim.get("seed", 0)}

    def check_threads(self, wildcards) -> int:
        """The concurrency check runs two timed processes at once: twice a timed job's threads."""
        if wildcards.check == "concurrency":
            return min(self.workflow.cores, 2 * self.timed_threads)
        return self.timed_threads

    def check_slots(self, wildcards) -> int:
        """The concurrency check uses every GPU itself: it holds the whole `timed_run` pool."""
        return max(1, self.gpus) if wildcards.check == "concurrency" else 1

    # --- what the timed jobs call --------------------------------------------------------------------------
    def launcher_cell(self) -> RunKey:
        from compile_study.measure.checks.launcher import CELLS  # (its statistics cost this process a second to import)

        mode, batch, precision = CELLS[self.device]
        return RunKey(mode, "module", batch, "static", precision, 0)

    def timer_cells(self) -> list[RunKey]:
        """The grid's compiled configurations the timer check times again (measure/checks/cells.py TIMER_CASES)."""
        cells = [RunKey(mode, "module", batch, "static", "bf16" if self.device == "cuda" else "fp32", 0)
                 for mode, batch in TIMER_CASES[self.device] if mode != "eager"]
        return [cell for cell in cells if cell in self.compiles]

    def concurrency_cell(self) -> RunKey:
        """The configuration the compile-concurrency check compiles alone (measure/checks/compile_concurrency.py CELLS)."""
        from compile_study.measure.checks.compile_concurrency import CELLS

        mode, batch, precision = CELLS[self.device]
        return RunKey(mode, "module", batch, "static", precision, 0)

    def concurrency_phase(self) -> list[str]:
        """The compile phase's cold compiles of the compile-concurrency check's cell (none where the grid lacks it)."""
        cell = self.concurrency_cell()
        c = self.compiles.get(cell)
        return [self.layout.compile_record(cell, i) for i in range(c["n"])] if c else []

    def method_check(self, check: str, out: str, log: str, threads: int) -> None:
        """Rule method_check: the launcher and compile_concurrency checks drive processes from here (holding the
        host as timed work does); every other check is a process of its own."""
        from compile_study.measure.checks import compile_concurrency
        from compile_study.measure.checks import launcher as launcher_check

        expected = self.expected_job_seconds(f"method_check:{check}")
        jobs.in_time(expected, out)
        if check in check_targets.METHOD_CHECKS:
            warm = [self.cache_dir_of(cell) for cell in self.timer_cells()] if check == "timer_check" else []
            return jobs.check_job(check, check_targets.METHOD_CHECKS[check], self.data_dir, out, self.config["model"],
                                  log, threads, self.device, expected, warm)
        cell = {"launcher": self.launcher_cell(), "compile_concurrency": self.concurrency_cell()}.get(check)
        steps = self.runs.get(cell) or grid.grid_defaults()
        settings = {k: steps[k] for k in grid.STEP_KEYS if k in steps} | self.config["train"]
        if check == "compile_concurrency":  # its compiles run on every core: it holds every lane
            with isolation.HOST.timed(isolation.lanes(self.device), every=True):
                jobs.in_time(expected, out)  # again, after the wait
                return compile_concurrency.main(self.data_dir, out, self.config["model"], self.device, settings, log,
                                                self.cores_per_compile, self.concurrency_phase())
        cache = self.cache_dir_of(cell) if cell in self.runs else None
        launcher_check.main(self.data_dir, out, self.config["model"], self.device, settings, log, threads, cache)

    def progress(self) -> str:
        """The line each run prints as it ends: runs recorded, and the time left by the estimate."""
        return estimate.progress_message(self.runs, self.layout, self.device, self.gpus, self.config["model"],
                                         self.compiles, self.overlap)

    @functools.cached_property
    def _known_runs(self) -> dict:
        return costs.known_runs(costs.plan_records(self.layout), self.device, self.config["model"])

    def expected_seconds(self, wildcards):
        """A run's estimated seconds (aggregate/estimate/estimate.py), asked by its job only where the call has a time
        limit (core/calls/deadline.py)."""
        key = RunKey.of(wildcards)
        return lambda: estimate.run_seconds(key, self.device, self._known_runs)[0]

    def expected_job_seconds(self, rule: str):
        """A job's estimated seconds (aggregate/estimate/estimate.py job_seconds: the median of the rule's jobs in the
        stored studies' logs; a method check as `method_check:<check>`), asked by the job only where the call has
        a time limit (core/calls/deadline.py)."""
        units = estimate.check_units(rule.split(":")[-1], self.device) if rule.startswith("method_check:") else 1
        if rule == "mlp_claim":
            sizes = estimate.mlp_sizes(self.config, self.device)
            rule, units = costs.mlp_rule(sizes), len(sizes)
        return lambda: estimate.job_seconds(rule, self._known_jobs, units)

    @functools.cached_property
    def _known_jobs(self) -> dict:
        """The stored studies' logged jobs (aggregate/estimate/estimate.py known_jobs), read once an invocation."""
        return costs.known_jobs(costs.stored_studies(), self.device, self.config["model"])

    def planned_jobs(self) -> dict[str, int]:
        """Rule -> jobs whose outputs are missing (the runs apart), for the estimate."""
        def missing(paths):
            return sum(not os.path.exists(p) for p in paths)

        L = self.layout
        checks = [c for c in self.checks_on if not os.path.exists(L.check(c))]
        sizes = estimate.mlp_sizes(self.config, self.device)
        planned = estimate.plan_jobs(missing(self.parity_records()), checks, bool(shutil.which("latexmk")), sizes,
                                     missing(self.reproduction_targets()[:1]), self.device)
        return planned | {"prepare_data": missing(self.data_files[-1:]), "measure_peak": missing([L.peak]),
                          "check_model": missing([L.model]), costs.mlp_rule(sizes): missing([L.mlp]) * len(sizes)}

    # --- resources -----------------------------------------------------------------------------------------
    def slurm_resources(self, partition: str, **request) -> dict:
        """A job's SLURM request (profiles/slurm reads it; local runs ignore it): site settings from config `cluster`."""
        site = self.config["cluster"]
        wanted = {"slurm_partition": site[partition], "slurm_account": site["account"]}
        return {k: v for k, v in (wanted | request).items() if v is not None}

    @property
    def cpu_job(self) -> dict:
        """CPU-only stages go to the CPU partition."""
        return self.slurm_resources("cpu_partition")

    @property
    def compile_job(self) -> dict:
        """A job of the compile phase (a cold compile, a parity check) takes a compile's cores and, on a GPU study,
        a GPU (several compiles share one) on the compile partition (by default the GPU partition)."""
        cuda, site = self.device == "cuda", self.config["cluster"]
        partition = "compile_partition" if site["compile_partition"] else "gpu_partition" if cuda else "cpu_partition"
        return self.slurm_resources(partition, cpus_per_task=self.cores_per_compile, gpu=1 if cuda else None,
                                    gpu_model=site["gpu_model"] if cuda else None, constraint=site["constraint"])

    @property
    def timed_job(self) -> dict:
        """A timed job takes a whole GPU and cores of its own, so that no other job shares its device or its cores
        (on a CPU grid: the cores alone, on the CPU partition)."""
        cuda, site = self.device == "cuda", self.config["cluster"]
        return self.slurm_resources("gpu_partition" if cuda else "cpu_partition", cpus_per_task=site["timed_cpus"],
                                    gpu=1 if cuda else None, gpu_model=site["gpu_model"] if cuda else None,
                                    constraint=site["constraint"])
