"""A study's plan, as the rules read it: the config checked, the device's grid, and for every rule its inputs,
outputs, params and resources. Built once when the workflow loads (workflow/rules/common.smk: `P = Plan(...)`).

A live study (the project directory) runs its grid into results/<device>/; a stored study (a directory with
config.yaml and runs/, e.g. `snakemake --cores all --directory reference/<name>`) has its runs done, and only the
aggregate rules (summary, figures, paper) run, with the same layout (core/layout.py).

Planning is pure: building the plan and every invocation that runs no job (a dry run, --lint, --summary,
--dag) change no file. The repairs a crash leaves to do (plan/repairs.py) are made by the invocation that runs
jobs, when Snakemake asks for the inputs of its targets, before it looks at any output; the others name them.
Bad config stops the workflow here, before any job, with one readable message naming the file that set it.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys

from compile_study.aggregate import estimate
from compile_study.checks import targets as check_targets
from compile_study.checks.cells import TIMER_CASES
from compile_study.core import config_check, damaged, data_check, grid, study_lock, vocab
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
from compile_study.core.model import for_device
from compile_study.core.record import CONFIGURATION_KEYS, RunKey
from compile_study.measure import isolation, jobs, launch
from compile_study.measure.isolation import count_gpus
from compile_study.plan import repairs
from compile_study.report import workflow_report

DATA_DIR = "resources/data"
DATA_FILES = [f"{DATA_DIR}/{split}_{part}.npy" for split in ("train", "eval") for part in ("ids", "lengths", "labels")
              ] + [f"{DATA_DIR}/tokenizer.json", f"{DATA_DIR}/facts.json"]
SCHEMA = "workflow/schemas/config.schema.yaml"  # below the Snakefile's directory


def say(line: str) -> None:
    print(line, file=sys.stderr)


class Plan:
    """Everything the rules read. `workflow` is Snakemake's (basedir, cores, the invocation's mode); `config` the
    merged config, validated here (its defaults filled in)."""

    def __init__(self, workflow, config: dict, directory: str = "."):
        self.workflow, self.config = workflow, config
        self.stored = is_stored_study(directory)
        self.schema = os.path.join(workflow.basedir, SCHEMA)
        self.templates = os.path.join(workflow.basedir, "paper", "templates")
        self.data_dir, self.data_files = DATA_DIR, DATA_FILES
        self.method_checks = CHECKS  # the checks rule method_check can make (config `checks` picks them)
        self.software_labels = workflow_report.software  # environment.json's columns in Snakemake's report
        self._device_errors: list[str] = []
        self._sources: list = []
        self._repaired = False
        if self.stored:
            self._load_stored()
        else:
            self._load_live()
        L = self.layout
        self.runs = {} if self.stored else grid.expand(config["grids"][self.device])  # key -> its step settings
        self.checks_on = [] if self.stored else config["checks"].get(self.device, [])
        # a timed job's threads: its share of the cores where several GPUs run timed jobs at once
        # (`--resources timed_run=N`; each pins itself to a disjoint share, measure/isolation.py)
        self.gpus = count_gpus() if self.device == "cuda" and not self.stored else 1
        self.timed_threads = max(1, workflow.cores // max(1, self.gpus))
        # one Inductor cache tree per study directory (results/cpu -> resources/inductor_cache/cpu)
        self.cache_root = f"resources/inductor_cache/{os.path.basename(L.root)}"
        self.call_logs = "logs" if self.stored else L.logs  # where core/session.py keeps each call's log
        # how the README names the study's directory in its rebuild command
        self.study_dir = f"reference/{os.path.basename(os.getcwd())}" if self.stored else L.root
        self.yardstick = self._yardstick()
        if not self.stored:  # not the synthetic stand-in unseen where the yardstick trained on real text
            config_check.refuse(data_check.yardstick_refusal(config, self.device, self.yardstick, DATA_DIR))
        self.reproduction_names = [config["yardstick"][self.device], self.study_dir]

    # --- loading -------------------------------------------------------------------------------------------
    def _load_stored(self) -> None:
        from snakemake.utils import validate

        validate(self.config, schema=self.schema)  # fills in keys added since it ran
        self.layout = Layout(".", logs=".snakemake/rebuild-logs")
        problem = damaged.stored_problems(self.layout.stored_records())  # its runs cannot be redone here
        if problem:
            sys.exit(problem)
        self.device = stored_device(self.layout.stored_records())

    def _load_live(self) -> None:
        from snakemake.utils import validate

        config = self.config
        self._sources = config_check.config_sources(self.workflow)
        errors = config_check.schema_errors(config, self.schema)
        if errors:
            sys.exit(config_check.format_errors(errors, self._sources))
        validate(config, schema=self.schema)  # fills in the defaults
        self.device = self.resolve_device()  # the semantic checks concern the grid about to run
        config["model"] = for_device(config["model"], self.device)  # a value given per device: this device's
        errors = config_check.semantic_errors(config, devices=[self.device])
        if errors:
            sys.exit(config_check.format_errors(errors, self._sources))
        # device: cuda without a GPU: a dry run still plans the GPU study; a run stops before its first job
        self._device_errors = config_check.device_errors(config)
        config_check.warn_before_start(self._device_errors)
        config_check.warn(config_check.data_warnings(config["data"]), self._sources)
        root = study_root(self.device, config["model"])  # results/<device>[-<model>], its logs alike
        self.layout = Layout(root, logs=f"logs/{os.path.basename(root)}")

    def resolve_device(self) -> str:
        """Config `device`, or cuda when torch sees a GPU (asked only where nvidia-smi lists one: importing torch
        would cost this process seconds)."""
        if self.config["device"] != "auto":
            return self.config["device"]
        if count_gpus() == 0:
            return "cpu"
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def _yardstick(self) -> str | None:
        """The stored study this study's speedups are checked against (config `yardstick`, relative to the project
        even for a stored study run with --directory), or None: none configured, this very study, or a study of
        another model (a warning says so). One that is no stored study, or of another device type, stops the
        workflow here, before any job."""
        path = self.config["yardstick"][self.device]
        if not path:
            return None
        full = os.path.normpath(os.path.join(self.workflow.basedir, path))
        if same_study(full, self.layout.root):
            return None  # a study against itself (or a copy of it) says nothing
        if self.stored and not os.path.exists(full):
            return None  # a stored study outlives the one it was checked against: it keeps that report
        problem = yardstick_problem(full, self.device)
        if problem:
            sys.exit(f"config yardstick.{self.device}: {problem} (set yardstick: {{{self.device}: null}} to go without)")
        other = model_difference(full, self.config["model"])
        if other:  # e.g. a plugged model under the default yardstick: nothing to reproduce
            say(f"warning: config yardstick.{self.device}: {path}: {other}; no reproduction report "
                "(python -m compile_study compare-models compares two models' speedups)")
            return None
        return full

    # --- the invocation ------------------------------------------------------------------------------------
    @property
    def executing(self) -> bool:
        """Whether this invocation runs jobs: Snakemake's main process with an executor that is no dry run (known
        only once Snakemake builds the DAG; --lint, --summary and --dag build it with none)."""
        w = self.workflow
        return bool(w.is_main_process and getattr(w, "executor_plugin", None) is not None
                    and not w.dryrun and not w.touch)

    def repair(self) -> None:
        """Once per invocation, before Snakemake looks at any output: repair what a crash left (plan/repairs.py)
        where this invocation runs jobs, else name it."""
        if self._repaired or self.stored or not self.workflow.is_main_process:
            return
        self._repaired = True
        found = repairs.find(self.layout, self.summary_inputs())
        if not self.executing:
            lines = repairs.describe(found)
        else:
            lines = repairs.make(found, self.layout)
            missing = [p for p in self.summary_inputs() if not os.path.lexists(p)]
            problem = repairs.unwritable(self.layout, missing)
            if problem:
                sys.exit(problem)
        for line in lines:
            say(line)

    def before_start(self) -> None:
        """Onstart, before the first job of an invocation that runs jobs: refuse a GPU study without a GPU (with
        a cluster executor the jobs run on hosts of their own), remove what shows a run whose record is gone,
        then print the runs to do and their estimated device time."""
        if self._device_errors and self.workflow.local_exec:
            sys.exit(config_check.format_errors(self._device_errors, self._sources))
        study_lock.hold(".")  # (the Snakefile took it already; a no-op then)
        if self.stored:
            return
        self.remove_stale_views()
        # to Snakemake's log too, where the study's README reads it back beside the call's wall time
        from snakemake.logging import logger

        logger.info(estimate.plan_message(self.runs, self.layout, self.device, self.gpus, self.planned_jobs(),
                                          self.config["model"], self.compiles, self.slots))
        if self.workflow.local_exec:
            launch.start()  # the warm server's imports overlap data preparation

    def remove_stale_views(self) -> None:
        """The summary, figures, papers and README go while a run they show has lost its record (deleted, or set
        aside as damaged): none of them may show it. This run makes them again once the run is redone."""
        views, why = damaged.stale_views(self.layout, self.runs)
        for view in views:
            shutil.rmtree(view) if os.path.isdir(view) else os.remove(view)
        if views:
            say(f"{why}: removed {', '.join(views)}, made from them")

    # --- targets -------------------------------------------------------------------------------------------
    def all_targets(self, wildcards=None) -> list[str]:
        """Rule all: every file of the study and its reproduction report. Snakemake checks only a target's own
        inputs for a file that is gone (not the files between them and the jobs that made them), so a deleted
        record, summary or figure is made again only if `all` names it. Asked first when the DAG is built: the
        repairs come before Snakemake looks at any output."""
        self.repair()
        L = self.layout
        made = [L.summary, L.parity_table, L.claims, L.environment, L.figures]
        return self.paper_targets() + made + list(self.summary_inputs()) + self.reproduction_targets()

    def paper_targets(self) -> list[str]:
        """Markdown and LaTeX always; the PDF where latexmk is installed (else the paper_pdf rule is skipped)."""
        L = self.layout
        if shutil.which("latexmk"):
            return [L.paper("md"), L.paper("tex"), L.readme, L.paper("pdf")]
        say("paper_pdf: skipped (latexmk is not installed)")
        return [L.paper("md"), L.paper("tex"), L.readme]

    def reproduction_targets(self) -> list[str]:
        return [self.layout.reproduction("md"), self.layout.reproduction("csv")] if self.yardstick else []

    # --- inputs --------------------------------------------------------------------------------------------
    def run_records(self, wildcards=None) -> list[str]:
        self.repair()
        L = self.layout
        return L.stored_records() if self.stored else [L.record(key) for key in self.runs]

    def summary_inputs(self, wildcards=None) -> dict[str, RunKey | None]:
        """Every file the summary is made from -> its run key (None: JSON that is not a run record)."""
        L = self.layout
        stored = L.stored_records() if self.stored else []
        records = {L.record(key): key for key in self.runs} | {p: None for p in stored}
        compiles = {L.compile_record(key, i): key.with_repeat(i) for key, c in self.compiles.items()
                    for i in range(c["n"])} | {L.portable_record(key, i): key.with_repeat(i)
                                               for key, c in self.compiles.items() for i in range(c["portable"])
                                               } | {p: None for p in (L.stored_compiles() if self.stored else [])}
        others = self.parity_records() + list(self.optional_inputs().values()) + [L.facts]
        return records | compiles | {p: None for p in others}

    def optional_inputs(self, wildcards=None) -> dict[str, str]:
        """Peak, MLP claim and method checks: made by this study's rules, or whatever a stored study has."""
        L = self.layout
        base = {"peak": L.peak, "mlp": L.mlp, "model": L.model}
        if not self.stored:
            return base | {name: L.check(name) for name in self.checks_on}
        there = base | {name: L.check(name) for name in CHECKS}
        return {k: v for k, v in there.items() if os.path.exists(v)}

    def compiled_cache(self, wildcards) -> list[str]:
        """A compiled run waits for its configuration's first cold compile (rule cold_compile), whose cache it
        starts from, warm; an eager run waits for nothing."""
        self.repair()
        key = RunKey.of(wildcards).with_repeat(0)
        return [self.layout.compile_record(key, 0)] if key in self.compiles else []

    def compile_records(self, wildcards=None) -> list[str]:
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

    def last_repeat(self, cell: RunKey) -> RunKey:
        return cell.with_repeat(max(k.repeat for k in self.runs if k.same_configuration(cell)))

    def parity_inputs(self, wildcards) -> dict:
        """The prepared data and, where the check's mode and precision has a cell (parity_cell), that cell's first
        cold compile: the check runs on the cache it filled, in the compile phase, compiling nothing again."""
        cell = self.parity_cell(wildcards.precision, wildcards.compile_mode)
        base = {"data": DATA_FILES, "model": self.layout.model}
        return base if cell is None else base | {"cell": self.layout.compile_record(cell, 0)}

    def check_inputs(self, wildcards) -> dict:
        """The data; the launcher check also waits for its cell's runs, so that it runs on their warm cache; the
        compile-concurrency check for the compile phase's cold compiles of its cell, its "among others" side."""
        base = {"data": DATA_FILES, "model": self.layout.model}
        if wildcards.check == "compile_concurrency":
            return base | {"phase": self.concurrency_phase()}
        if wildcards.check == "timer_check":  # its compiles start from the caches of the grid's same cells
            return base | {"warm": [self.layout.compile_record(cell, 0) for cell in self.timer_cells()]}
        cell = self.launcher_cell() if wildcards.check == "launcher" else None
        return base if cell not in self.runs else base | {"cell": self.layout.record(self.last_repeat(cell))}

    def timer_cells(self) -> list[RunKey]:
        """The grid's compiled configurations the timer check times again (checks/cells.py TIMER_CASES)."""
        cells = [RunKey(mode, "module", batch, "static", "bf16" if self.device == "cuda" else "fp32", 0)
                 for mode, batch in TIMER_CASES[self.device] if mode != "eager"]
        return [cell for cell in cells if cell in self.compiles]

    def concurrency_cell(self) -> RunKey:
        """The configuration the compile-concurrency check compiles alone (checks/compile_concurrency.py CELLS)."""
        from compile_study.checks.compile_concurrency import CELLS

        mode, batch, precision = CELLS[self.device]
        return RunKey(mode, "module", batch, "static", precision, 0)

    def concurrency_phase(self) -> list[str]:
        """The compile phase's cold compiles of the compile-concurrency check's cell (none where the grid lacks it)."""
        cell = self.concurrency_cell()
        c = self.compiles.get(cell)
        return [self.layout.compile_record(cell, i) for i in range(c["n"])] if c else []

    def test_records(self, wildcards=None) -> dict:
        """The study's kept test tiers (tests/<tier>.json, from pytest --tier-record), where there are any."""
        kept = self.layout.stored_test_records()
        return {"tests": kept} if kept else {}

    def call_log(self, wildcards=None) -> dict:
        """The study's calls.jsonl where it was run through compile_study.core.session."""
        return {"calls": self.layout.calls} if os.path.exists(self.layout.calls) else {}

    def yardstick_records(self, wildcards=None) -> list[str]:
        """The yardstick's run records, as paths from the working directory (a stored study's too)."""
        return [os.path.relpath(p) for p in Layout(self.yardstick).stored_records()]

    def yardstick_facts(self, wildcards=None) -> str:
        """The yardstick's data facts (what it trained on), as a path from the working directory."""
        return os.path.relpath(Layout(self.yardstick).facts)

    def reproduction_report(self, wildcards=None) -> dict:
        """For the study's README: the report rule reproduction makes, or the one a stored study kept."""
        if self.yardstick or os.path.exists(self.layout.reproduction("md")):
            return {"reproduction": self.layout.reproduction("md")}
        return {}

    # --- the compile phase ---------------------------------------------------------------------------------
    @functools.cached_property
    def compiles(self) -> dict[RunKey, dict]:
        """Each compiled configuration -> how its cold compiles run (core/grid.py compiles)."""
        phase = self.config["compile_phase"][self.device]
        return {} if self.stored else grid.compiles(self.runs, phase["n_cold"], phase["n_portable"])

    def _compile_of(self, wildcards) -> tuple[RunKey, int, dict]:
        index = int(wildcards.index)
        key = RunKey.of({k: getattr(wildcards, k) for k in CONFIGURATION_KEYS} | {"repeat": 0})
        return key, index, self.compiles[key]

    def compile_inputs(self, wildcards) -> dict:
        """The data and the model's check; a mode that starts from another's GEMM search waits for that search."""
        key, _, c = self._compile_of(wildcards)
        base = {"data": DATA_FILES, "model": self.layout.model}
        return base | ({"search": self.layout.compile_record(c["search_from"], 0)} if c["search_from"] else {})

    def compile_params(self, wildcards) -> dict:
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
                            "threads": self.timed_threads, "start": "cold"},
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
        return {"data": DATA_FILES, "model": self.layout.model, "cold": self.layout.compile_record(key, 0)}

    def portable_params(self, wildcards) -> dict:
        """A portable start's job (measure/jobs.py compile_run): as a cold compile's, on a scratch cache of its own
        (emptied first), fed the first cold compile's artifacts."""
        key, index = self._portable_of(wildcards)
        cold = self._compile_job(key, 0, self.compiles[key])
        scratch = f"{self.cache_root}/cold/{os.path.basename(self.cache_dir_of(key))}-p{index}"
        return cold | {"run": cold["run"] | {"repeat": index},
                       "compile": cold["compile"] | {"index": index, "alone": False, "start": "portable"},
                       "cache_dir": scratch, "search_cache": None, "artifacts": {"load": self.artifacts_of(key)}}

    @property
    def cores_per_compile(self) -> int:
        return min(self.workflow.cores, self.config["compile_phase"][self.device]["cores_per_compile"])

    @property
    def slots(self) -> int:
        """Cold compiles at once (k): the cores Snakemake may use over each compile's."""
        return max(1, self.workflow.cores // self.cores_per_compile)

    def compile_threads(self, wildcards) -> int:
        """A compile's cores (Snakemake runs cores / this many at once); a GEMM search takes a timed job's."""
        return self.timed_threads if self._compile_of(wildcards)[2]["alone"] else self.cores_per_compile

    def compile_slots(self, wildcards) -> int:
        """The `timed_run` slot a GEMM search holds (it benchmarks on the device, like a timed run); others none."""
        return int(self._compile_of(wildcards)[2]["alone"])

    def expected_compile_seconds(self, wildcards):
        """A cold compile's estimated seconds (aggregate/estimate.py), asked only under a call's time limit."""
        key, _, c = self._compile_of(wildcards)
        return lambda: estimate.compile_seconds(key, self.device, self._known_compiles, estimate.search_kind(c))

    def expected_portable_seconds(self, wildcards):
        """A portable start's estimated seconds (aggregate/estimate.py), asked only under a call's time limit."""
        key, _ = self._portable_of(wildcards)
        return lambda: estimate.compile_seconds(key, self.device, self._known_compiles, "portable")

    @functools.cached_property
    def _known_compiles(self) -> dict:
        return estimate.known_compiles(estimate.plan_compiles(self.layout), self.device, self.config["model"])

    # --- params --------------------------------------------------------------------------------------------
    def run_params(self, wildcards) -> dict:
        """The RunConfig fields of one job: its wildcards plus its sub-grid's step settings."""
        key = RunKey.of(wildcards)
        steps = {k: v for k, v in self.runs[key].items() if k not in ("sub_grid", "search_from")}
        # evidence (phase split, profiler, inference) once per configuration: repeat 0
        return key._asdict() | steps | self.config["train"] | {"evidence": key.repeat == 0}

    def cache_dir_of(self, key: RunKey) -> str:
        """One Inductor/Triton cache per configuration (its repeats share it: repeat 0 cold, the others warm)."""
        k = key
        return f"{self.cache_root}/{k.shape_regime}-{k.precision}-{k.compile_mode}-{k.compile_scope}-bs{k.batch_size}"

    def inductor_cache_dir(self, wildcards) -> str:
        return self.cache_dir_of(RunKey.of(wildcards))

    def parity_check(self, wildcards) -> dict:
        """A parity check's arguments (checks/parity.py `job`) and Inductor cache (its cell's, else its own), at
        its cell's batch size where the grid has one."""
        precision, mode = wildcards.precision, wildcards.compile_mode
        cell = self.parity_cell(precision, mode)
        settings = dict(self.config["parity"][self.device]) | ({"batch_size": cell.batch_size} if cell else {})
        return {"kwargs": {"data_dir": DATA_DIR, "model": self.config["model"], "compile_mode": mode,
                           "precision": precision, "device": self.device, "settings": settings},
                "cache_dir": self.cache_dir_of(cell) if cell else f"{self.cache_root}/parity-{precision}-{mode}"}

    def peak_job(self, wildcards=None) -> dict:
        """The matmul peak's arguments (checks/peak.py `job`): the precisions the device's grid runs."""
        return {"device": self.device,
                "precisions": [p for p in vocab.PRECISIONS if any(k.precision == p for k in self.runs)]}

    def mlp_job(self, wildcards=None) -> dict:
        """The MLP claim's arguments (checks/mlp_claim.py `job`)."""
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
        from compile_study.checks.launcher import CELLS  # (its statistics cost this process a second to import)

        mode, batch, precision = CELLS[self.device]
        return RunKey(mode, "module", batch, "static", precision, 0)

    def method_check(self, check: str, out: str, log: str, threads: int) -> None:
        """Rule method_check: the launcher and compile_concurrency checks drive processes from here (holding the
        host as timed work does); every other check is a process of its own."""
        from compile_study.checks import compile_concurrency
        from compile_study.checks import launcher as launcher_check

        jobs.in_time(self.expected_job_seconds(f"method_check:{check}"), out)
        if check in check_targets.METHOD_CHECKS:
            warm = [self.cache_dir_of(cell) for cell in self.timer_cells()] if check == "timer_check" else []
            return jobs.check_job(check, check_targets.METHOD_CHECKS[check], DATA_DIR, out, self.config["model"],
                                  log, threads, self.device, warm)
        cell = {"launcher": self.launcher_cell(), "compile_concurrency": self.concurrency_cell()}.get(check)
        steps = self.runs.get(cell) or grid.grid_defaults()
        settings = {k: steps[k] for k in grid.STEP_KEYS if k in steps} | self.config["train"]
        if check == "compile_concurrency":
            with isolation.HOST.timed():
                return compile_concurrency.main(DATA_DIR, out, self.config["model"], self.device, settings, log,
                                                self.cores_per_compile, self.concurrency_phase())
        cache = self.cache_dir_of(cell) if cell in self.runs else None
        launcher_check.main(DATA_DIR, out, self.config["model"], self.device, settings, log, threads, cache)

    def progress(self) -> str:
        """The line each run prints as it ends: runs recorded, and the time left by the estimate."""
        return estimate.progress_message(self.runs, self.layout, self.device, self.gpus, self.config["model"],
                                         self.compiles)

    @functools.cached_property
    def _known_runs(self) -> dict:
        return estimate.known_runs(estimate.plan_records(self.layout), self.device, self.config["model"])

    def expected_seconds(self, wildcards):
        """A run's estimated seconds (aggregate/estimate.py), asked by its job only where the call has a time
        limit (core/deadline.py)."""
        key = RunKey.of(wildcards)
        return lambda: estimate.run_seconds(key, self.device, self._known_runs)[0]

    def expected_job_seconds(self, rule: str):
        """A job's estimated seconds (aggregate/estimate.py job_seconds: the median of the rule's jobs in the
        stored studies' logs; a method check as `method_check:<check>`), asked by the job only where the call has
        a time limit (core/deadline.py)."""
        units = estimate.mlp_sizes(self.config, self.device) if rule == "mlp_claim" else 1
        return lambda: estimate.job_seconds(rule, self._known_jobs, units)

    @functools.cached_property
    def _known_jobs(self) -> dict:
        """The stored studies' logged jobs (aggregate/estimate.py known_jobs), read once an invocation."""
        return estimate.known_jobs(estimate.stored_studies(), self.device, self.config["model"])

    def planned_jobs(self) -> dict[str, int]:
        """Rule -> jobs whose outputs are missing (the runs apart), for the estimate."""
        def missing(paths):
            return sum(not os.path.exists(p) for p in paths)

        L = self.layout
        checks = [c for c in self.checks_on if not os.path.exists(L.check(c))]
        planned = estimate.plan_jobs(missing(self.parity_records()), checks, bool(shutil.which("latexmk")))
        return planned | {"prepare_data": missing(DATA_FILES[-1:]), "measure_peak": missing([L.peak]),
                          "check_model": missing([L.model]),
                          "mlp_claim": missing([L.mlp]) * estimate.mlp_sizes(self.config, self.device)}

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
