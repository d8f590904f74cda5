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

import os
import shutil
import sys

from compile_study.aggregate.estimate import costs, estimate
from compile_study.core.calls import damaged, study_lock
from compile_study.core.config import config_check, config_schema, data_check, grid
from compile_study.core.layout import (
    STORED,
    Layout,
    is_stored_study,
    kinds_path,
    log_root,
    model_difference,
    same_study,
    stored_device,
    study_root,
    yardstick_problem,
)
from compile_study.core.models.model import for_device
from compile_study.core.record import RunKey
from compile_study.measure.checks.spec import config_problems
from compile_study.measure.process import launch
from compile_study.measure.process.isolation import count_gpus
from compile_study.plan import checks, repairs, workflow_report
from compile_study.plan.compile_phase import CompilePhase
from compile_study.plan.lanes import Lanes
from compile_study.plan.timed_jobs import TimedJobs

DATA_DIR = "resources/data"
DATA_FILES = [f"{DATA_DIR}/{split}_{part}.npy" for split in ("train", "eval") for part in ("ids", "lengths", "labels")
              ] + [f"{DATA_DIR}/tokenizer.json", f"{DATA_DIR}/facts.json"]
SCHEMA = "workflow/schemas/config.schema.yaml"  # below the Snakefile's directory


def say(line: str) -> None:
    print(line, file=sys.stderr)


class Plan:
    """Everything the rules read. `workflow` is Snakemake's (basedir, cores, the invocation's mode); `config` the
    merged config, validated here (its defaults filled in). The plan itself holds the study (its device, grid,
    layout, yardstick) and every rule's targets and inputs; its parts own the rest, each built from what it
    needs: `lanes` where jobs run (plan/lanes.py), `compile` the compile phase (plan/compile_phase.py), `timed`
    the timed runs (plan/timed_jobs.py), `checks` the method checks (plan/checks.py)."""

    def __init__(self, workflow, config: dict, directory: str = "."):
        self.workflow, self.config = workflow, config
        self.stored = is_stored_study(directory)
        self.schema = os.path.join(workflow.basedir, SCHEMA)
        self.templates = os.path.join(workflow.basedir, "paper", "templates")
        self.data_dir, self.data_files = DATA_DIR, DATA_FILES
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
        self.lanes = Lanes(config, self.device, self.stored, workflow.cores)
        self.compile = CompilePhase(config, self.device, self.runs, L, self.stored, self.lanes, workflow.cores,
                                    DATA_DIR, DATA_FILES)
        self.timed = TimedJobs(config, self.device, self.runs, L, self.lanes, self.compile)
        self.checks = checks.Checks(config, self.device, self.runs, L, self.stored, self.lanes, self.compile,
                                    self.timed, DATA_DIR, DATA_FILES, workflow.cores)
        self.call_logs = L.own_logs if self.stored else L.logs  # where core/calls/session.py keeps each call's log
        # how the README names the study's directory in its rebuild command
        self.study_dir = f"{STORED}/{os.path.basename(os.getcwd())}" if self.stored else L.root
        self.pool_member = self.study_dir if self.stored else None  # what the paper leaves out of its kind's pool
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
        config_check.refuse(config_check.file_problems(self.workflow))  # e.g. a key given twice
        self._sources = config_check.config_sources(self.workflow)
        errors = config_schema.schema_errors(config, self.schema)
        if errors:
            sys.exit(config_schema.format_errors(errors, self._sources))
        validate(config, schema=self.schema)  # fills in the defaults
        self.device = self.resolve_device()  # the semantic checks concern the grid about to run
        config["model"] = for_device(config["model"], self.device)  # a value given per device: this device's
        errors = config_check.semantic_errors(config, devices=[self.device]) + config_problems(config)
        if errors:
            sys.exit(config_schema.format_errors(errors, self._sources))
        # device: cuda without a GPU: a dry run still plans the GPU study; a run stops before its first job
        self._device_errors = config_check.device_errors(config)
        config_check.warn_before_start(self._device_errors)
        config_check.warn(config_check.data_warnings(config["data"]), self._sources)
        root = study_root(self.device, config["model"])  # results/<device>[-<model>], its logs alike
        self.layout = Layout(root, logs=log_root(root))

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
            sys.exit(config_schema.format_errors(self._device_errors, self._sources))
        study_lock.hold(".")  # (the Snakefile took it already; a no-op then)
        if self.stored:
            return
        self.remove_stale_views()
        # to Snakemake's log too, where the study's README reads it back beside the call's wall time
        from snakemake.logging import logger

        logger.info(estimate.plan_message(self.runs, self.layout, self.device, self.lanes.gpus, self.planned_jobs(),
                                          self.config["model"], self.compile.compiles, self.compile.slots,
                                          self.lanes.overlap))
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
        phase = self.compile.compiles
        compiles = {L.compile_record(key, i): key.with_repeat(i) for key, c in phase.items()
                    for i in range(c["n"])} | {L.portable_record(key, i): key.with_repeat(i)
                                               for key, c in phase.items() for i in range(c["portable"])
                                               } | {p: None for p in (L.stored_compiles() if self.stored else [])}
        others = self.compile.parity_records() + list(self.optional_inputs().values()) + [L.facts]
        return records | compiles | {p: None for p in others}

    def optional_inputs(self, wildcards=None) -> dict[str, str]:
        """Peak, MLP claim and method checks: made by this study's rules, or whatever a stored study has."""
        L = self.layout
        base = {"peak": L.peak, "mlp": L.mlp, "model": L.model}
        if not self.stored:
            return base | {name: L.check(name) for name in self.checks.on}
        there = base | {name: L.check(name) for name in self.checks.names}
        return {k: v for k, v in there.items() if os.path.exists(v)}

    def compiled_cache(self, wildcards) -> list[str]:
        """A compiled run waits for its configuration's first cold compile (rule cold_compile), whose cache it
        starts from, warm; an eager run waits for nothing."""
        self.repair()
        key = RunKey.of(wildcards).with_repeat(0)
        return [self.layout.compile_record(key, 0)] if key in self.compile.compiles else []

    def test_records(self, wildcards=None) -> dict:
        """The study's kept test tiers (tests/<tier>.json, from pytest --tier-record), where there are any."""
        kept = self.layout.stored_test_records()
        return {"tests": kept} if kept else {}

    def call_log(self, wildcards=None) -> dict:
        """The study's calls.jsonl where it was run through compile_study.core.calls.session."""
        return {"calls": self.layout.calls} if os.path.exists(self.layout.calls) else {}

    def yardstick_records(self, wildcards=None) -> list[str]:
        """The yardstick's run records, as paths from the working directory (a stored study's too)."""
        return [os.path.relpath(p) for p in Layout(self.yardstick).stored_records()]

    def yardstick_facts(self, wildcards=None) -> str:
        """The yardstick's data facts (what it trained on), as a path from the working directory."""
        return os.path.relpath(Layout(self.yardstick).facts)

    def yardstick_claims(self, wildcards=None) -> dict:
        """The yardstick's summary.csv, decisions.json and claims.csv (the paper's claims: aggregate/compare/rejudge.py
        read_claims), those it has, as paths from the working directory."""
        y = Layout(self.yardstick)
        found = {"yardstick_summary": y.summary, "yardstick_decisions": y.decisions, "yardstick_claims": y.claims}
        return {k: os.path.relpath(p) for k, p in found.items() if os.path.exists(p)}

    def kinds_input(self, wildcards=None) -> dict:
        """For a GPU study's paper: the stored studies' finding across GPU kinds (kinds.json, layout.KINDS, written by
        rebuild --all), where the project has it."""
        path = kinds_path()
        return {"kinds": os.path.relpath(path)} if self.device == "cuda" and path.is_file() else {}

    def reproduction_report(self, wildcards=None) -> dict:
        """For the study's README: the report rule reproduction makes, or the one a stored study kept."""
        if self.yardstick or os.path.exists(self.layout.reproduction("md")):
            return {"reproduction": self.layout.reproduction("md")}
        return {}

    # --- the estimate ------------------------------------------------------------------------------------------
    def planned_jobs(self) -> dict[str, int]:
        """Rule -> jobs whose outputs are missing (the runs apart), for the estimate."""
        def missing(paths):
            return sum(not os.path.exists(p) for p in paths)

        L = self.layout
        checks_left = [c for c in self.checks.on if not os.path.exists(L.check(c))]
        sizes = estimate.mlp_sizes(self.config, self.device)
        planned = estimate.plan_jobs(missing(self.compile.parity_records()), checks_left,
                                     bool(shutil.which("latexmk")), sizes, missing(self.reproduction_targets()[:1]),
                                     self.device)
        return planned | {"prepare_data": missing(self.data_files[-1:]), "measure_peak": missing([L.peak]),
                          "check_model": missing([L.model]), costs.mlp_rule(sizes): missing([L.mlp]) * len(sizes)}
