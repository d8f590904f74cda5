"""Where a study's files live: one layout for a live study and a stored one.

A study directory holds everything its paper is made from and the paper itself:

    <root>/config.yaml                the study's merged config          <root>/facts.json     the data facts
    <root>/model.json                 the model's class, parameters, FLOPs per token and plug (rule check_model)
    <root>/runs/<regime>/<precision>/<mode>/<scope>/bs<B>/r<repeat>.json (+ .trace.json.gz)   one record per run
    <root>/compiles/<regime>/<precision>/<mode>/<scope>/bs<B>/c<i>.json, p<i>.json   cold compiles, portable starts
        (c0.torch-trace.log.gz, c0.tlparse/index.html: a configuration's first cold compile's trace and its report)
    <root>/parity/<precision>/<mode>.json   <root>/peak.json   <root>/claims/mlp.json   <root>/checks/*.json
    <root>/summary.csv  parity.csv  claims.csv  decisions.json  environment.json  figures/  paper.md  paper.tex  paper.pdf
    <root>/reproduction.md, reproduction.csv   against the stored study config `yardstick` names, if any
    <root>/README.md (generated)   <root>/calls.jsonl (the calls that ran it)   <root>/logs/ (a stored study's)
    <root>/damaged/runs/...        records found damaged, set aside (with a .why.txt note) while their runs are redone

A live study's root is `results/<device>` (under the project; `results/<device>-<name>` for a named or plugged
model: `study_root`); a stored one (e.g. `reference/<name>`) is the same directory with its runs already done,
and `snakemake --cores all --directory reference/<name>` remakes its summary, figures and paper through the
same rules. Job logs go to `logs/` beside the root's parent
tree, never into a stored study. Torch-free.
"""

from __future__ import annotations

import filecmp
import os
import re
from dataclasses import dataclass
from pathlib import Path

from compile_study.core.record import RECORD, RunKey

PARITY = "parity/{precision}/{compile_mode}.json"
# A cold compile of the compile phase (core/compile_record.py): `index` counts a configuration's cold compiles
COMPILE = "compiles/{shape_regime}/{precision}/{compile_mode}/{compile_scope}/bs{batch_size}/c{index}.json"
# A portable start (vocab.COLD_STARTS): an empty cache fed the artifacts the configuration's first cold compile saved
PORTABLE = COMPILE.replace("/c{index}.json", "/p{index}.json")
# The structured trace (TORCH_TRACE) of a configuration's first cold compile, beside its record: the trace's lines
# gzipped (about TRACE_MAX_BYTES at most: a longer one keeps its first whole lines and says so in compile.trace),
# and the HTML report tlparse makes of it (index.html first; kept where it fits in TRACE_MAX_BYTES too)
COMPILE_TRACE = COMPILE.replace("/c{index}.json", "/c{index}.torch-trace.log.gz")
COMPILE_TLPARSE = COMPILE.replace("/c{index}.json", "/c{index}.tlparse")
TRACE_MAX_BYTES = 8_000_000


def compile_trace_files(record_path: str) -> dict[str, str]:
    """A first cold compile's trace and tlparse report, named after its record (COMPILE_TRACE, COMPILE_TLPARSE)."""
    stem = re.sub(r"\.json$", "", record_path)
    return {"trace": f"{stem}.torch-trace.log.gz", "tlparse": f"{stem}.tlparse"}


# How much hosts of one kind differ (aggregate/compare/hosts.py, written by aggregate/compare/reruns.py from every stored study):
# the project's file, not a study's; the reproduction rule reads it from any study's directory
PROJECT = Path(__file__).resolve().parents[2]
STORED = "reference"  # the project's stored studies: reference/<name>/
LIVE = "results"  # the studies one runs: results/<device>[-<model>] (study_root)
HOST_EFFECT = f"{STORED}/host-effect.json"
KINDS = f"{STORED}/kinds.json"  # the stored studies across GPU kinds (aggregate/compare/kinds.py), what a GPU paper quotes


@dataclass(frozen=True)
class Layout:
    root: str  # "results/cuda", or "." inside a stored study's directory
    logs: str = "logs"

    def _p(self, rel: str) -> str:
        return rel if self.root in ("", ".") else f"{self.root}/{rel}"

    # inputs of the aggregate stages
    @property
    def config(self) -> str:
        return self._p("config.yaml")

    @property
    def facts(self) -> str:
        return self._p("facts.json")

    @property
    def model(self) -> str:
        """The checked model's facts (core/models/plug_check.py); a study stored before plugs has none."""
        return self._p("model.json")

    @property
    def record_pattern(self) -> str:
        return self._p(RECORD)

    @property
    def trace_pattern(self) -> str:
        return self._p(RECORD.replace(".json", ".trace.json.gz"))

    @property
    def records_glob(self) -> str:
        """Every run record of the study (glob.glob with recursive=True)."""
        return self._p("runs/**/r*.json")

    def record(self, key: RunKey) -> str:
        return self.record_pattern.format(**key._asdict())

    @property
    def compile_pattern(self) -> str:
        return self._p(COMPILE)

    @property
    def portable_pattern(self) -> str:
        return self._p(PORTABLE)

    @property
    def compiles_glob(self) -> str:
        """Every cold compile's record of the study (glob.glob with recursive=True); portable starts apart."""
        return self._p("compiles/**/c[0-9]*.json")  # not tlparse's files in c0.tlparse/

    @property
    def portables_glob(self) -> str:
        """Every portable start's record of the study (glob.glob with recursive=True)."""
        return self._p("compiles/**/p[0-9]*.json")

    def compile_record(self, key: RunKey, index: int) -> str:
        """The index-th cold compile of key's configuration (its repeat is ignored)."""
        return self.compile_pattern.format(**(key._asdict() | {"index": index}))

    def portable_record(self, key: RunKey, index: int) -> str:
        """The index-th portable start of key's configuration (its repeat is ignored)."""
        return self.portable_pattern.format(**(key._asdict() | {"index": index}))

    @property
    def parity_pattern(self) -> str:
        return self._p(PARITY)

    @property
    def peak(self) -> str:
        return self._p("peak.json")

    @property
    def mlp(self) -> str:
        return self._p("claims/mlp.json")

    def check(self, name: str) -> str:
        return self._p(f"checks/{name}.json")

    # outputs
    @property
    def summary(self) -> str:
        return self._p("summary.csv")

    @property
    def parity_table(self) -> str:
        return self._p("parity.csv")

    @property
    def claims(self) -> str:
        return self._p("claims.csv")

    @property
    def decisions(self) -> str:
        """Every ranking, comparison and method-check verdict the paper words (aggregate/decide.py)."""
        return self._p("decisions.json")

    @property
    def environment(self) -> str:
        return self._p("environment.json")

    @property
    def figures(self) -> str:
        return self._p("figures")

    def paper(self, ext: str) -> str:
        return self._p(f"paper.{ext}")

    @property
    def host_effect(self) -> str:
        """The project's host-effect estimate (HOST_EFFECT), as a path from the working directory (rule
        reproduction's input: a new estimate remakes every reproduction report)."""
        return os.path.relpath(host_effect_path())

    def reproduction(self, ext: str) -> str:
        """The study against its yardstick (report/compare/reproduction.py): ext md (the report) or csv (its table)."""
        return self._p(f"reproduction.{ext}")

    @property
    def readme(self) -> str:
        return self._p("README.md")

    @property
    def calls(self) -> str:
        """One line per call that ran the study (compile_study/core/calls/session.py), when it was run through it."""
        return self._p("calls.jsonl")

    def test_record(self, tier: str) -> str:
        """A pytest session's outcome on this study's hardware (`pytest -m <tier> --tier-record <this>`)."""
        return self._p(f"tests/{tier}.json")

    def stored_test_records(self) -> list[str]:
        return sorted(str(p) for p in Path(self.root or ".").glob("tests/*.json"))

    @property
    def damaged(self) -> str:
        """Where damaged records are set aside (core/calls/damaged.py), each beside a note saying what was wrong."""
        return self._p("damaged")

    def views(self) -> list[str]:
        """What is made from the records (the tables, the figures, the papers, the README): none of it may stand
        while a record it was made from is gone."""
        return [self.summary, self.parity_table, self.claims, self.decisions, self.environment, self.figures,
                self.paper("md"), self.paper("tex"), self.paper("pdf"), self.readme]

    def log(self, name: str) -> str:
        return f"{self.logs}/{name}.log"

    # the job logs of the rules that make a study's files mirror the study's tree under `logs`
    @property
    def record_log(self) -> str:
        return self.log(RECORD.removesuffix(".json"))

    @property
    def compile_log(self) -> str:
        return self.log(COMPILE.removesuffix(".json"))

    @property
    def portable_log(self) -> str:
        return self.log(PORTABLE.removesuffix(".json"))

    @property
    def parity_log(self) -> str:
        return self.log(PARITY.removesuffix(".json"))

    def check_log(self, name: str) -> str:
        return self.log(f"checks/{name}")

    @property
    def own_logs(self) -> str:
        """A stored study's own logs (its calls' Snakemake logs, calls.jsonl `snakemake_log`): its logs/."""
        return self._p("logs")

    def stored_log(self, name: str) -> str:
        return f"{self.own_logs}/{name}"

    # a stored study: what is on disk
    def stored_records(self) -> list[str]:
        return sorted(str(p) for p in Path(self.root or ".").glob("runs/**/*.json"))

    def stored_compiles(self) -> list[str]:
        """Every cold compile and portable start a stored study has."""
        root = Path(self.root or ".")
        return sorted(str(p) for pattern in ("c[0-9]*.json", "p[0-9]*.json") for p in root.glob(f"compiles/**/{pattern}"))

    def stored_parity(self) -> list[str]:
        return sorted(str(p) for p in Path(self.root or ".").glob("parity/**/*.json"))


def model_name(model: dict | None) -> str | None:
    """The model's name in a directory's name: `model.name`, else a plugged model's (its factory's function, or
    hf-<model_type>); None for the built-in model without a name."""
    model = model or {}
    name = model.get("name")
    if not name and model.get("factory"):
        name = model["factory"].rpartition(":")[2]
    if not name and model.get("hf_config"):
        name = f"hf-{model['hf_config'].get('model_type')}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name) if name else None


def study_root(device: str, model: dict | None = None) -> str:
    """A live study's directory: results/<device>, or results/<device>-<name> for a named or plugged model, so
    that the studies of two models never share records, Inductor caches or logs."""
    name = model_name(model)
    return f"{LIVE}/{device}" if name is None else f"{LIVE}/{device}-{name}"


def stored_studies(holding: str = "config.yaml", references: str | Path = STORED) -> list[Path]:
    """The stored studies (`references`/<name>: STORED from the project's root) that hold the file `holding`
    (relative to a study: "summary.csv", "calls.jsonl", ...), in name order."""
    return sorted(p.parent for p in Path(references).glob(f"*/{holding}"))


def study_of(path: str) -> str:
    """The study a record belongs to: the directory above its runs/ or compiles/ tree (else its own folder)."""
    for tree in {f"/{pattern.split('/', 1)[0]}/" for pattern in (RECORD, COMPILE)}:
        if tree in path:
            return path.rsplit(tree, 1)[0]
    return os.path.dirname(path)


def log_root(root: str) -> str:
    """Where a live study's job logs go: logs/<its directory's name>, beside results/ (never into a study)."""
    return f"logs/{os.path.basename(root)}"


def host_effect_path(project: str | Path = PROJECT) -> Path:
    """Where the host-effect estimate of a project lives (HOST_EFFECT)."""
    return Path(project) / HOST_EFFECT


def kinds_path(project: str | Path = PROJECT) -> Path:
    """Where the finding across GPU kinds of a project lives (KINDS)."""
    return Path(project) / KINDS


def is_stored_study(directory: str | Path = ".") -> bool:
    """A directory holding a study's config snapshot and its run records: its runs are done."""
    d = Path(directory)
    return (d / "config.yaml").is_file() and (d / "runs").is_dir()


def require_study(directory: str | Path) -> Path:
    """A study's directory, live or stored, even one cut short (it holds runs/ or calls.jsonl; a live study writes
    its config.yaml late), else a SystemExit naming it: what a command given one says."""
    d = Path(directory)
    if not ((d / "runs").is_dir() or (d / "calls.jsonl").is_file()):
        raise SystemExit(f"{directory}: not a study directory (it has no runs/ and no calls.jsonl)")
    return d


def stored_device(record_paths: list[str]) -> str:
    """The device a stored study ran on (its records say it)."""
    from compile_study.core import record

    if not record_paths:
        raise SystemExit("this stored study has no run records under runs/")
    try:
        return record.read(record_paths[0])["env"]["device_type"]
    except record.RecordError as e:
        raise SystemExit(str(e)) from None


def same_study(a: str | Path, b: str | Path) -> bool:
    """The same directory, or a copy of it (the same run records, byte for byte): comparing says nothing."""
    a, b = Path(a), Path(b)
    if a.resolve() == b.resolve():
        return True
    found = [sorted(Path(p).relative_to(d) for p in Layout(str(d)).stored_records()) for d in (a, b)]
    return bool(found[0]) and found[0] == found[1] and all(filecmp.cmp(a / p, b / p, shallow=False) for p in found[0])


def model_difference(directory: str | Path, model: dict) -> str | None:
    """Which keys of config `model` a stored study's model differs in (None: the same model). A reproduction
    compares two studies of one model; two models' speedups are compared by aggregate/compare/models.py instead."""
    from compile_study.core import record

    theirs = record.read(Layout(str(directory)).stored_records()[0])["config"]["model"]
    keys = sorted((set(theirs) & set(model)) - {"vocab_size", "n_classes"})  # those two are the data's
    differ = [k for k in keys if theirs[k] != model[k]]
    if not differ:
        return None
    there, here = (m.get("name") or "the built-in model" for m in (theirs, model))
    return f"its model ({there}) differs from this study's ({here}) in {', '.join(differ)}"


def yardstick_problem(directory: str | Path, device: str) -> str | None:
    """Why a directory cannot be the yardstick of a study on `device` (None if it can): config `yardstick` is
    checked with it before any job (aggregate/compare/compare.py makes the comparison)."""
    d = Path(directory)
    if not is_stored_study(d):
        return f"{directory} is not a stored study (it needs config.yaml and runs/ with run records)"
    paths = Layout(str(d)).stored_records()
    if not paths:
        return f"{directory} has no run records under runs/"
    theirs = stored_device(paths)
    if theirs != device:
        return (f"{directory} is a {theirs} study and this is a {device} study: a reproduction compares studies "
                "of one device type")
    return None
