"""The method checks, a part of a study's plan (plan/study.py `Plan.checks`, which the rules read as `P.checks`):
which checks config `checks` turns on (each a module of measure/checks/ that declares CHECK, measure/checks/spec.py),
and for rule method_check each one's inputs, threads, `timed_run` slots and job. Torch-free.
"""

from __future__ import annotations

import importlib

from compile_study.core.config import grid
from compile_study.core.record import RunKey
from compile_study.measure import jobs
from compile_study.measure.checks import targets
from compile_study.measure.checks.spec import method_checks
from compile_study.measure.process import isolation


class Checks:
    """`runs` the grid's, `layout` the study's, `lanes` the host's (plan/lanes.py), `compile` the compile phase
    (plan/compile_phase.py: the caches and cold compiles a check starts from), `timed` the timed runs (their
    estimates); `data_dir` and `data_files` the prepared data."""

    def __init__(self, config: dict, device: str, runs: dict, layout, stored: bool, lanes, compile_phase, timed,
                 data_dir: str, data_files: list[str], cores: int):
        self.config, self.device, self.runs, self.layout = config, device, runs, layout
        self.lanes, self.compile, self.timed, self.cores = lanes, compile_phase, timed, cores
        self.data_dir, self.data_files = data_dir, data_files
        self.names = tuple(method_checks())  # every check rule method_check can make
        self.on = [] if stored else config["checks"].get(device, [])  # those config `checks` turns on

    def inputs(self, wildcards) -> dict:
        """The data; the launcher check also waits for its cell's runs, so that it runs on their warm cache; the
        compile-concurrency check for the compile phase's cold compiles of its cell, its "among others" side; the
        timer check for the first cold compiles of its cells, whose caches its compiles start from."""
        base = {"data": self.data_files, "model": self.layout.model}
        if wildcards.check == "compile_concurrency":
            return base | {"phase": self.concurrency_phase()}
        if wildcards.check == "timer_check":
            return base | {"warm": [self.layout.compile_record(cell, 0) for cell in self.timer_cells()]}
        cell = self.cell_of("launcher") if wildcards.check == "launcher" else None
        return base if cell not in self.runs else base | {"cell": self.layout.record(self.last_repeat(cell))}

    def threads(self, wildcards) -> int:
        """A timed job's threads times the check's `shares` (two timed processes at once: twice)."""
        return min(self.cores, method_checks()[wildcards.check].shares * self.lanes.timed_threads)

    def slots(self, wildcards) -> int:
        """A check that uses every GPU itself (`every_gpu`) holds the whole `timed_run` pool; the others one."""
        return max(1, self.lanes.gpus) if method_checks()[wildcards.check].every_gpu else 1

    def last_repeat(self, cell: RunKey) -> RunKey:
        return cell.with_repeat(max(k.repeat for k in self.runs if k.same_configuration(cell)))

    def cell_of(self, check: str) -> RunKey:
        """The one configuration a check measures on this device (its module's CELLS: the module is imported here,
        not when the workflow loads, since its statistics cost this process a second to import)."""
        mode, batch, precision = importlib.import_module(method_checks()[check].module).CELLS[self.device]
        return RunKey(mode, "module", batch, "static", precision, 0)

    def timer_cells(self) -> list[RunKey]:
        """The grid's compiled configurations the timer check times again (its CHECK's cases)."""
        cells = [RunKey(mode, "module", batch, "static", "bf16" if self.device == "cuda" else "fp32", 0)
                 for mode, batch in method_checks()["timer_check"].cases[self.device] if mode != "eager"]
        return [cell for cell in cells if cell in self.compile.compiles]

    def concurrency_phase(self) -> list[str]:
        """The compile phase's cold compiles of the compile-concurrency check's cell (none where the grid lacks it)."""
        cell = self.cell_of("compile_concurrency")
        c = self.compile.compiles.get(cell)
        return [self.layout.compile_record(cell, i) for i in range(c["n"])] if c else []

    def run(self, check: str, out: str, log: str, threads: int) -> None:
        """Rule method_check: a check's `main` in a process of its own; one that drives processes from Snakemake's
        own (`in_process`: launcher, compile_concurrency) runs here, holding the host as timed work does."""
        spec = method_checks()[check]
        expected = self.timed.expected_job_seconds(f"method_check:{check}")
        jobs.in_time(expected, out)
        if not spec.in_process:
            warm = [self.compile.cache_dir_of(cell) for cell in self.timer_cells()] if check == "timer_check" else []
            return jobs.check_job(check, targets.method_check(spec.module), self.data_dir, out, self.config["model"],
                                  log, threads, self.device, expected, warm, every=spec.every_gpu)
        self._run_in_process(check, out, log, threads, expected)

    def _run_in_process(self, check: str, out: str, log: str, threads: int, expected) -> None:
        from compile_study.measure.checks import compile_concurrency
        from compile_study.measure.checks import launcher as launcher_check

        cell = self.cell_of(check)
        steps = self.runs.get(cell) or grid.grid_defaults()
        settings = {k: steps[k] for k in grid.STEP_KEYS if k in steps} | self.config["train"]
        if check == "compile_concurrency":  # its compiles run on every core: it holds every lane
            with isolation.HOST.timed(isolation.lanes(self.device), every=True):
                jobs.in_time(expected, out)  # again, after the wait
                return compile_concurrency.main(self.data_dir, out, self.config["model"], self.device, settings, log,
                                                self.compile.cores_per_compile, self.concurrency_phase())
        cache = self.compile.cache_dir_of(cell) if cell in self.runs else None
        launcher_check.main(self.data_dir, out, self.config["model"], self.device, settings, log, threads, cache)
