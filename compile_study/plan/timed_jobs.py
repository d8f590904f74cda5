"""The timed runs, a part of a study's plan (plan/study.py `Plan.timed`, which the rules read as `P.timed`): each
run's settings, cache and priority, the matmul peak's and the MLP claim's arguments, and every job's estimated
seconds. Torch-free.
"""

from __future__ import annotations

import functools

from compile_study.aggregate.estimate import costs, estimate, schedule
from compile_study.core import vocab
from compile_study.core.record import RunKey


class TimedJobs:
    """`runs` the grid's (key -> step settings), `layout` the study's, `lanes` the host's (plan/lanes.py),
    `compile` the compile phase (plan/compile_phase.py: each configuration's cache and cold compiles)."""

    def __init__(self, config: dict, device: str, runs: dict, layout, lanes, compile_phase):
        self.config, self.device, self.runs, self.layout = config, device, runs, layout
        self.lanes, self.compile = lanes, compile_phase

    def params(self, wildcards) -> dict:
        """The RunConfig fields of one job: its wildcards plus its sub-grid's step settings."""
        key = RunKey.of(wildcards)
        steps = {k: v for k, v in self.runs[key].items() if k not in ("sub_grid", "search_from")}
        # evidence (phase split, profiler, inference) once per configuration: repeat 0
        return key._asdict() | steps | self.config["train"] | {"evidence": key.repeat == 0}

    def cache_dir(self, wildcards) -> str:
        """A run's Inductor cache: its configuration's, which the first cold compile filled."""
        return self.compile.cache_dir_of(RunKey.of(wildcards))

    @functools.cached_property
    def _run_ranks(self) -> dict[RunKey, int]:
        """Each run's place in the order that hides the most loads (aggregate/estimate/schedule.py run_order), from
        the estimate's seconds of each run and of its load."""
        keys = list(self.runs)
        runs = [(estimate.run_seconds(k, self.device, self._known_runs)[0],
                 estimate.load_seconds(k, self.device, self._known_runs)) for k in keys]
        return {keys[i]: rank for rank, i in enumerate(schedule.run_order(runs, self.lanes.gpus))}

    def priority(self, wildcards) -> float:
        """A run's Snakemake priority: where loads overlap timed work, by its place in the order (the first 9, the
        last just above 1: below the compile phase's 10, so that a run never goes before a compile that is ready;
        Snakemake starts the ready job of highest priority as a run's cores come free); else 0."""
        if not self.lanes.overlap or not self.runs:
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

    # --- estimates -----------------------------------------------------------------------------------------
    def progress(self) -> str:
        """The line each run prints as it ends: runs recorded, and the time left by the estimate."""
        return estimate.progress_message(self.runs, self.layout, self.device, self.lanes.gpus, self.config["model"],
                                         self.compile.compiles, self.lanes.overlap)

    @functools.cached_property
    def _known_runs(self) -> dict:
        return costs.known_runs(costs.plan_records(self.layout), self.device, self.config["model"])

    def expected_seconds(self, wildcards):
        """A run's estimated seconds (aggregate/estimate/estimate.py), asked by its job only where the call has a
        time limit (core/calls/deadline.py)."""
        key = RunKey.of(wildcards)
        return lambda: estimate.run_seconds(key, self.device, self._known_runs)[0]

    def expected_job_seconds(self, rule: str):
        """A job's estimated seconds (aggregate/estimate/estimate.py job_seconds: the median of the rule's jobs in
        the stored studies' logs; a method check as `method_check:<check>`), asked by the job only where the call
        has a time limit (core/calls/deadline.py)."""
        units = estimate.check_units(rule.split(":")[-1], self.device) if rule.startswith("method_check:") else 1
        if rule == "mlp_claim":
            sizes = estimate.mlp_sizes(self.config, self.device)
            rule, units = costs.mlp_rule(sizes), len(sizes)
        return lambda: estimate.job_seconds(rule, self._known_jobs, units)

    @functools.cached_property
    def _known_jobs(self) -> dict:
        """The stored studies' logged jobs (aggregate/estimate/estimate.py known_jobs), read once an invocation."""
        return costs.known_jobs(costs.stored_studies(), self.device, self.config["model"])
