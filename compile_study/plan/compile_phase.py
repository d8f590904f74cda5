"""The compile phase, a part of a study's plan (plan/study.py `Plan.compile`, which the rules read as `P.compile`):
every compiled configuration's cold compiles and portable starts, the parity checks and the Inductor caches they
fill. Torch-free.
"""

from __future__ import annotations

import functools
import os

from compile_study.aggregate.estimate import costs, estimate
from compile_study.core import vocab
from compile_study.core.config import grid
from compile_study.core.record import CONFIGURATION_KEYS, RunKey


class CompilePhase:
    """`runs` the grid's (key -> step settings), `layout` the study's, `lanes` the host's (plan/lanes.py), `cores`
    Snakemake's, `data_dir` and `data_files` the prepared data; a stored study compiles nothing."""

    def __init__(self, config: dict, device: str, runs: dict, layout, stored: bool, lanes, cores: int,
                 data_dir: str, data_files: list[str]):
        self.config, self.device, self.runs, self.layout, self.stored = config, device, runs, layout, stored
        self.lanes, self.cores, self.data_dir, self.data_files = lanes, cores, data_dir, data_files
        # one Inductor cache tree per study directory (results/cpu -> resources/inductor_cache/cpu)
        self.cache_root = f"resources/inductor_cache/{os.path.basename(layout.root)}"

    @functools.cached_property
    def compiles(self) -> dict[RunKey, dict]:
        """Each compiled configuration -> how its cold compiles run (core/config/grid.py compiles)."""
        if self.stored:  # a stored study's compiles are done: its config may predate the compile phase
            return {}
        phase = self.config["compile_phase"][self.device]
        return grid.compiles(self.runs, phase["n_cold"], phase["n_portable"])

    def _compile_of(self, wildcards) -> tuple[RunKey, int, dict]:
        index = int(wildcards.index)
        key = RunKey.of({k: getattr(wildcards, k) for k in CONFIGURATION_KEYS} | {"repeat": 0})
        return key, index, self.compiles[key]

    def inputs(self, wildcards) -> dict:
        """The data and the model's check; a mode that starts from another's GEMM search waits for that search."""
        key, _, c = self._compile_of(wildcards)
        base = {"data": self.data_files, "model": self.layout.model}
        return base | ({"search": self.layout.compile_record(c["search_from"], 0)} if c["search_from"] else {})

    def params(self, wildcards) -> dict:
        """A cold compile's job (measure/jobs.py compile_run): its run settings (evidence off), how it runs, its
        cache (the first compile's is the configuration's own, the timed runs' later; the others' are scratch)."""
        return self._compile_job(*self._compile_of(wildcards))

    def _compile_job(self, key: RunKey, index: int, c: dict) -> dict:
        steps = {k: v for k, v in self.runs[key].items() if k not in ("sub_grid", "search_from")}
        run = key.with_repeat(index)._asdict() | steps | self.config["train"] | {"evidence": False}
        scratch = f"{self.cache_root}/cold/{os.path.basename(self.cache_dir_of(key))}-c{index}"
        return {"run": run, "model": self.config["model"], "device": self.device,
                "compile": {"index": index, "alone": c["alone"], "cores_per_compile": self.cores_per_compile,
                            "slots": self.slots,  # the invocation's: Snakemake runs no more at once
                            # torch's threads as in the timed runs: Inductor's CPU kernels, and the cache key of
                            # the graphs holding them, depend on the thread count (the timed runs must find them)
                            "threads": self.lanes.run_threads, "start": "cold",
                            # the inference graph the first repeat's evidence times, compiled here, not in it
                            "inference": index == 0 and vocab.times_inference(key.compile_scope, key.shape_regime)},
                "cache_dir": self.cache_dir_of(key) if index == 0 else scratch,
                "search_cache": self.cache_dir_of(c["search_from"]) if c["search_from"] and index == 0 else None,
                # the first cold compile saves the portable artifacts its configuration's portable starts load
                "artifacts": {"save": self.artifacts_of(key)} if index == 0 and c["portable"] else None}

    def artifacts_of(self, key: RunKey) -> str:
        """Where a configuration's first cold compile keeps its portable artifacts (the bytes a job would ship)."""
        return f"{self.cache_root}/artifacts/{os.path.basename(self.cache_dir_of(key))}.bin"

    # --- portable starts (rule portable_start): the compile phase's work too -----------------------------------
    def _portable_of(self, wildcards) -> tuple[RunKey, int]:
        key = RunKey.of({k: getattr(wildcards, k) for k in CONFIGURATION_KEYS} | {"repeat": 0})
        return key, int(wildcards.index)

    def portable_inputs(self, wildcards) -> dict:
        """The data, the model's check and the first cold compile, which saved the artifacts this start loads."""
        key, _ = self._portable_of(wildcards)
        return {"data": self.data_files, "model": self.layout.model, "cold": self.layout.compile_record(key, 0)}

    def portable_params(self, wildcards) -> dict:
        """A portable start's job (measure/jobs.py compile_run): as a cold compile's, on a scratch cache of its own
        (emptied first), fed the first cold compile's artifacts."""
        key, index = self._portable_of(wildcards)
        cold = self._compile_job(key, 0, self.compiles[key])
        scratch = f"{self.cache_root}/cold/{os.path.basename(self.cache_dir_of(key))}-p{index}"
        return cold | {"run": cold["run"] | {"repeat": index},
                       "compile": cold["compile"] | {"index": index, "alone": False, "start": "portable",
                                                     "inference": False},
                       "cache_dir": scratch, "search_cache": None, "artifacts": {"load": self.artifacts_of(key)}}

    @property
    def cores_per_compile(self) -> int:
        return min(self.cores, self.config["compile_phase"][self.device]["cores_per_compile"])

    @property
    def slots(self) -> int:
        """Cold compiles at once (k): the cores Snakemake may use over each compile's."""
        return max(1, self.cores // self.cores_per_compile)

    @property
    def job(self) -> dict:
        """A compile-phase job's cluster request (plan/lanes.py compile_job): a compile's cores."""
        return self.lanes.compile_job(self.cores_per_compile)

    def threads(self, wildcards) -> int:
        """A compile's cores (Snakemake runs cores / this many at once); a GEMM search takes a timed job's."""
        return self.lanes.timed_threads if self._compile_of(wildcards)[2]["alone"] else self.cores_per_compile

    def timed_slots(self, wildcards) -> int:
        """The `timed_run` slot a GEMM search holds (it benchmarks on the device, like a timed run); others none."""
        return int(self._compile_of(wildcards)[2]["alone"])

    def expected_seconds(self, wildcards):
        """A cold compile's estimated seconds (aggregate/estimate/estimate.py), asked only under a call's time limit."""
        key, _, c = self._compile_of(wildcards)
        return lambda: estimate.compile_seconds(key, self.device, self._known_compiles, estimate.search_kind(c))

    def expected_portable_seconds(self, wildcards):
        """A portable start's estimated seconds (aggregate/estimate/estimate.py), asked only under a call's time limit."""
        key, _ = self._portable_of(wildcards)
        return lambda: estimate.compile_seconds(key, self.device, self._known_compiles, "portable")

    @functools.cached_property
    def _known_compiles(self) -> dict:
        return costs.known_compiles(costs.plan_compiles(self.layout), self.device, self.config["model"])

    def records(self, wildcards=None) -> list[str]:
        """Every cold compile and portable start of the compile phase (a stored study: whichever it has)."""
        L = self.layout
        if self.stored:
            return L.stored_compiles()
        return [L.compile_record(key, i) for key, c in self.compiles.items() for i in range(c["n"])] + [
            L.portable_record(key, i) for key, c in self.compiles.items() for i in range(c["portable"])]

    def parity_records(self, wildcards=None) -> list[str]:
        """One parity check per compiled mode and precision that the device's grid runs."""
        if self.stored:
            return self.layout.stored_parity()
        return [self.layout.parity_pattern.format(precision=p, compile_mode=m) for p, m in grid.parity_pairs(self.runs)]

    def parity_cell(self, precision: str, compile_mode: str) -> RunKey | None:
        """The grid's first static `module` cell of this mode and precision (smallest batch), or None: the parity
        check runs at its batch size on its Inductor cache, after its runs, so that it reuses that cell's
        compilation (max-autotune's GEMM search above all) instead of paying for another."""
        cells = [k for k in self.runs if (k.compile_mode, k.compile_scope, k.shape_regime, k.precision, k.repeat)
                 == (compile_mode, "module", "static", precision, 0)]
        return min(cells, key=lambda k: k.batch_size, default=None)

    def parity_inputs(self, wildcards) -> dict:
        """The prepared data and, where the check's mode and precision has a cell (parity_cell), that cell's first
        cold compile: the check runs on the cache it filled, in the compile phase, compiling nothing again."""
        cell = self.parity_cell(wildcards.precision, wildcards.compile_mode)
        base = {"data": self.data_files, "model": self.layout.model}
        return base if cell is None else base | {"cell": self.layout.compile_record(cell, 0)}

    def cache_dir_of(self, key: RunKey) -> str:
        """One Inductor/Triton cache per configuration (its repeats share it: repeat 0 cold, the others warm)."""
        k = key
        return f"{self.cache_root}/{k.shape_regime}-{k.precision}-{k.compile_mode}-{k.compile_scope}-bs{k.batch_size}"

    def parity_check(self, wildcards) -> dict:
        """A parity check's arguments (measure/checks/parity.py `job`) and Inductor cache (its cell's, else its own), at
        its cell's batch size where the grid has one."""
        precision, mode = wildcards.precision, wildcards.compile_mode
        cell = self.parity_cell(precision, mode)
        settings = dict(self.config["parity"][self.device]) | ({"batch_size": cell.batch_size} if cell else {})
        return {"kwargs": {"data_dir": self.data_dir, "model": self.config["model"], "compile_mode": mode,
                           "precision": precision, "device": self.device, "settings": settings},
                "cache_dir": self.cache_dir_of(cell) if cell else f"{self.cache_root}/parity-{precision}-{mode}"}
