"""Where a study's files live: one layout for a live study and a stored one.

A study directory holds everything its paper is made from and the paper itself:

    <root>/config.yaml                the study's merged config          <root>/facts.json     the data facts
    <root>/runs/<regime>/<precision>/<mode>/<scope>/bs<B>/r<repeat>.json (+ .trace.json.gz)   one record per run
    <root>/parity/<precision>/<mode>.json   <root>/peak.json   <root>/claims/mlp.json   <root>/checks/*.json
    <root>/summary.csv  parity.csv  claims.csv  environment.json  figures/  paper.md  paper.tex  paper.pdf
    <root>/README.md (generated)   <root>/calls.jsonl (the calls that ran it)   <root>/logs/ (a stored study's)

A live study's root is `results/<device>` (under the project); a stored one (e.g. `reference/<name>`) is the
same directory with its runs already done, and `snakemake --cores all --directory reference/<name>` remakes
its summary, figures and paper through the same rules. Job logs go to `logs/` beside the root's parent
tree, never into a stored study. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from compile_study.core.record import RunKey

RECORD = "runs/{shape_regime}/{precision}/{compile_mode}/{compile_scope}/bs{batch_size}/r{repeat}.json"
PARITY = "parity/{precision}/{compile_mode}.json"
CHECKS = ("timer_check", "reference_drift", "concurrency", "launcher")  # optional method checks (checks/<name>.py)


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
    def environment(self) -> str:
        return self._p("environment.json")

    @property
    def figures(self) -> str:
        return self._p("figures")

    def paper(self, ext: str) -> str:
        return self._p(f"paper.{ext}")

    @property
    def readme(self) -> str:
        return self._p("README.md")

    @property
    def calls(self) -> str:
        """One line per call that ran the study (compile_study/core/session.py), when it was run through it."""
        return self._p("calls.jsonl")

    def log(self, name: str) -> str:
        return f"{self.logs}/{name}.log"

    # a stored study: what is on disk
    def stored_records(self) -> list[str]:
        return sorted(str(p) for p in Path(self.root or ".").glob("runs/**/*.json"))

    def stored_parity(self) -> list[str]:
        return sorted(str(p) for p in Path(self.root or ".").glob("parity/**/*.json"))


def is_stored_study(directory: str | Path = ".") -> bool:
    """A directory holding a study's config snapshot and its run records: its runs are done."""
    d = Path(directory)
    return (d / "config.yaml").is_file() and (d / "runs").is_dir()


def stored_device(record_paths: list[str]) -> str:
    """The device a stored study ran on (its records say it)."""
    from compile_study.core import record

    if not record_paths:
        raise SystemExit("this stored study has no run records under runs/")
    return record.read(record_paths[0])["env"]["device_type"]
