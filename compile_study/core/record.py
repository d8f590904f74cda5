"""The run record: one JSON file per run, its declared shape, and the one loader every reader goes through.

    python -m compile_study record results/cpu/runs/static/fp32/default/module/bs8/r0.json

A record is `{"schema_version", "config", "env", "status", "error", "metrics", "disturbed", "earlier_attempts"}`:
`config` is a RunConfig plus the model, `env` the hardware and versions (env.py), `status` one of vocab.STATUSES,
`metrics` the names declared in core/metrics.py (absent ones were not measured), `disturbed` None or the evidence that other
work on the host disturbed the run (core/disturbance.py), `earlier_attempts` the records of the run's disturbed
attempts that this one replaced, whole (measure/jobs.py redoes a disturbed run). Older records are upgraded on
reading (`upgrade`), so summary, figures, rebuild and `python -m compile_study record` see one shape. Torch-free.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from compile_study.core import compile_stages, digits, vocab
from compile_study.core.errors import InputError

# the metrics a record may hold, declared in core/metrics.py and read everywhere as record.SCALARS, record.OVERHEAD...
from compile_study.core.metrics import (  # noqa: F401
    HOST,
    OVERHEAD,
    PROFILE,
    PROFILE_SIDES,
    SCALARS,
    SERIES,
    TEXTS,
    WORK,
    fixed_cost_s,
)

SCHEMA_VERSION = 7  # 2: compile_scope; 3: phases, profiler, inference; 4: overhead breakdown, chunk order;
# 5: what else ran on the host per timed block (host_load), `disturbed` and the redone runs' `earlier_attempts`;
# 6: a run's load phase and timed part (`load_phase`, `timed_part`: cores, times) and host_load's `neighbours`
# 7: where the compiles' seconds went (`compile_stages`, `compile_stages_s`, `compile_rest_s`): absent before, which
# reads as not measured (no upgrade fills them in: a zero would claim a compile that took no time)
OLDEST_READABLE = 2  # version 1 records lack the in-process reference: render them with the commit that made them


class RunKey(NamedTuple):
    """One run's place in the grid, by name: the grid, the layout (a record's path) and the rules use it.

    `RunKey.of(wildcards)` makes one from strings (a rule's wildcards) or a record's config.
    """

    compile_mode: str  # vocab.COMPILE_MODES
    compile_scope: str  # vocab.COMPILE_SCOPES
    batch_size: int
    shape_regime: str  # vocab.Regime.parse
    precision: str  # vocab.PRECISIONS
    repeat: int  # the configuration's process index (0 compiles cold and takes the evidence)

    @classmethod
    def of(cls, fields) -> RunKey:
        """From any mapping (or object with a `get`) holding the six fields, strings or not."""
        ints = ("batch_size", "repeat")
        return cls(**{k: int(fields[k]) if k in ints else str(fields[k]) for k in cls._fields})

    def with_repeat(self, repeat: int) -> RunKey:
        return self._replace(repeat=repeat)

    def same_configuration(self, other: RunKey) -> bool:
        """The same configuration (every field but the repeat): repeats of one configuration share a cache."""
        return self.with_repeat(0) == other.with_repeat(0)


RUN_KEYS = RunKey._fields
CONFIGURATION_KEYS = RUN_KEYS[:-1]  # a configuration: a run key without its repeat
# where a run's record lives below its study's root (core/layout.py places it; read() holds a record to it)
RECORD = "runs/{shape_regime}/{precision}/{compile_mode}/{compile_scope}/bs{batch_size}/r{repeat}.json"
_RECORD_PATH = re.compile(r"(?:^|/)runs/(?P<shape_regime>[^/]+)/(?P<precision>[^/]+)/(?P<compile_mode>[^/]+)/"
                          r"(?P<compile_scope>[^/]+)/bs(?P<batch_size>\d+)/r(?P<repeat>\d+)\.json$")


def path_key(path: str | Path) -> RunKey | None:
    """The run key a record's path stands for (RECORD read backwards); None for a path outside that layout."""
    found = _RECORD_PATH.search(Path(path).as_posix())
    return RunKey.of(found.groupdict()) if found else None


@dataclass(frozen=True)
class RunConfig:
    """One run's settings: its place in the grid (RUN_KEYS) and its sub-grid's step settings."""

    compile_mode: str  # vocab.COMPILE_MODES
    batch_size: int
    shape_regime: str  # vocab.Regime.parse
    precision: str  # vocab.PRECISIONS
    repeat: int  # independent process index; seeds do not change with it
    compile_scope: str = "module"  # vocab.COMPILE_SCOPES
    warmup_steps: int = 5  # timed one by one; the compiled run's compilation happens here
    timed_steps: int = 50  # steady-state steps of the subject (and as many of the reference)
    interleave_chunk: int = 10  # subject and reference alternate in chunks of this many steps
    max_epoch_steps: int | None = None  # cap an epoch (CPU smoke runs); None = the whole split
    lr: float = 3e-4
    seed: int = 0
    recompile_limit: int = 8  # torch._dynamo.config.recompile_limit (8 is torch's default)
    phase_steps: int = 20  # steps per model in the forward/backward/optimizer split
    profile_steps: int = 3  # steps under torch.profiler (after as many unprofiled ones)
    evidence: bool = True  # phase split, profiler, inference, eval accuracy (once per configuration: repeat 0)

    def __post_init__(self) -> None:
        for key, allowed in (("compile_mode", vocab.COMPILE_MODES), ("precision", vocab.PRECISIONS),
                             ("compile_scope", vocab.COMPILE_SCOPES)):
            if getattr(self, key) not in allowed:
                raise ValueError(f"{key} {getattr(self, key)!r} is not one of {allowed}")
        vocab.Regime.parse(self.shape_regime)
        if not vocab.runs_with(self.compile_mode, self.compile_scope, self.shape_regime):
            raise ValueError(f"compile_scope {self.compile_scope!r} does not run with compile_mode "
                             f"{self.compile_mode!r} and shape_regime {self.shape_regime!r}")
        for key in ("seed", "repeat"):
            if getattr(self, key) < 0:
                raise ValueError(f"{key} must be >= 0, got {getattr(self, key)}")

    @property
    def regime(self) -> vocab.Regime:
        return vocab.Regime.parse(self.shape_regime)

    @property
    def times_inference(self) -> bool:
        return vocab.times_inference(self.compile_scope, self.shape_regime)

    def key(self) -> RunKey:
        return RunKey.of(asdict(self))


CONFIG_FIELDS = tuple(f.name for f in fields(RunConfig))

ENV_KEYS = ("device_type", "device_name", "torch", "triton", "cuda", "driver", "python", "cpu_model", "cpu_cores",
            "cpu_affinity", "git_commit", "git_dirty", "inductor_cache", "launcher", "float32_matmul_precision",
            "cuda_matmul_allow_tf32", "autotune_search")


class RecordError(InputError):
    """A record that cannot be read: the message names the file and what is wrong with it."""


# The shape every readable version shares (upgrade fills in the rest); checked where a record is read, so that a
# damaged or foreign file is named instead of failing deep inside the summary.
SHAPE = {
    "type": "object",
    "required": ["schema_version", "config", "env", "status"],
    "properties": {
        "schema_version": {"type": "integer"},
        "config": {
            "type": "object",
            "required": ["compile_mode", "batch_size", "shape_regime", "precision", "repeat"],
            "properties": {"compile_mode": {"enum": list(vocab.COMPILE_MODES)},
                           "compile_scope": {"enum": list(vocab.COMPILE_SCOPES)},
                           "batch_size": {"type": "integer", "minimum": 1}, "shape_regime": {"type": "string"},
                           "precision": {"enum": list(vocab.PRECISIONS)},
                           "repeat": {"type": "integer", "minimum": 0}},
        },
        "env": {"type": "object"},
        "status": {"enum": list(vocab.STATUSES)},
        "error": {"type": ["string", "null"]},
        "metrics": {"type": ["object", "null"]},
        "disturbed": {"type": ["object", "null"], "required": ["reasons"]},
        "earlier_attempts": {"type": "array", "items": {"type": "object"}},
    },
}


def new(cfg: RunConfig, model: dict, env: dict) -> dict:
    return {"schema_version": SCHEMA_VERSION, "config": asdict(cfg) | {"model": model}, "env": env,
            "status": "ok", "error": None, "metrics": {}, "disturbed": None, "earlier_attempts": []}


def upgrade(rec: dict, where: str = "record") -> dict:
    """A record of any readable version in today's shape (missing keys get the value they had implicitly)."""
    version = rec.get("schema_version", 1)
    if version < OLDEST_READABLE:
        raise RecordError(f"{where}: schema version {version} records are rendered by the commit that made them "
                          "(see its study's README), not by this one")
    if version > SCHEMA_VERSION:
        raise RecordError(f"{where}: schema version {version} is newer than this code's {SCHEMA_VERSION}")
    cfg = {f.name: f.default for f in fields(RunConfig) if f.default is not MISSING} | rec["config"]
    cfg.setdefault("compile_scope", "module")  # version 2 records predate scopes only in name
    metrics = rec.get("metrics") or {}
    return rec | {"schema_version": SCHEMA_VERSION, "config": cfg, "metrics": metrics,
                  "env": {k: None for k in ENV_KEYS} | rec["env"],
                  # before version 5 nothing was judged: no record says it was disturbed, none was redone
                  "disturbed": rec.get("disturbed"), "earlier_attempts": rec.get("earlier_attempts") or []}


def problem(path: str | Path, key: RunKey | None = None) -> str | None:
    """What is wrong with the record at `path` (None if nothing): empty, incomplete JSON, not a run record's
    shape, of an unreadable version, or the record of another run than the one its path stands for (`key`, or
    the path's own where it lies in the layout: path_key)."""
    try:
        _load(path, key)
    except RecordError as e:
        return str(e).removeprefix(f"{path}: ")
    return None


def _load(path: str | Path, key: RunKey | None = None) -> dict:
    import jsonschema  # here: only reading a record needs it

    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise RecordError(f"{path}: cannot be read ({e.strerror})") from None
    if not raw.strip():
        raise RecordError(f"{path}: empty file ({len(raw)} bytes)")
    try:
        rec = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordError(f"{path}: incomplete or corrupt JSON ({json_error(e)} in {len(raw):,} bytes: "
                          "a truncated copy?)") from None
    bad = next(iter(jsonschema.Draft202012Validator(SHAPE).iter_errors(rec)), None)
    if bad is not None:
        at = "/".join(map(str, bad.absolute_path)) or "top level"
        raise RecordError(f"{path}: not a run record ({at}: {bad.message[:200]})")
    rec = upgrade(rec, str(path))
    try:
        vocab.Regime.parse(rec["config"]["shape_regime"])
    except ValueError as e:
        raise RecordError(f"{path}: not a run record ({e})") from None
    found, key = RunKey.of(rec["config"]), key or path_key(path)  # a copy under another run's path is no run
    if key is not None and found != key:
        raise RecordError(f"{path}: holds the record of another run ({found.compile_mode} {found.compile_scope} "
                          f"bs{found.batch_size} {found.shape_regime} {found.precision} r{found.repeat})")
    return rec


def json_error(e: ValueError) -> str:
    """Where JSON stopped parsing, in a few words: "Expecting ',' delimiter, line 129, column 29"."""
    if isinstance(e, json.JSONDecodeError):
        return f"{e.msg}, line {e.lineno}, column {e.colno}"
    return f"{getattr(e, 'reason', e)}, byte {getattr(e, 'start', '?')}"


def read(path: str | Path) -> dict:
    """A record in today's shape; RecordError (naming the file) if it is damaged, not a run record, or another
    run's than its path says."""
    return _load(path)


def _row(rec: dict) -> dict:
    cfg, env, m = rec["config"], rec["env"], rec["metrics"]
    row = {k: cfg[k] for k in CONFIG_FIELDS} | {k: env.get(k) for k in ENV_KEYS}
    row |= {"status": rec["status"], "error": rec.get("error"),
            "reference_regime": vocab.Regime.parse(cfg["shape_regime"]).reference}
    row |= {k: m.get(k) for k in SCALARS}
    row |= compile_stages.columns(m.get("compile_stages"))  # None each where not measured
    row |= {k: m.get(k) for k in ("compile_stages_s", "compile_rest_s")}
    for side in PROFILE_SIDES:
        prof = m.get(side) or {}
        row |= {f"{side}_{k}": prof.get(k) for k in PROFILE}
        row[f"{side}_top_kernels"] = digits.dumps(prof.get("top_kernels") or [])
    row["kernel_kind"] = (m.get("profile") or {}).get("kernel_kind")
    row["model_class"], row["model_plug"] = m.get("model_class"), m.get("model_plug")
    row["evidence_errors"] = "; ".join(f"{k}: {v}" for k, v in (m.get("evidence_errors") or {}).items()) or None
    row["graph_break_reasons"] = "; ".join(m.get("graph_break_reasons") or []) or None
    for k in ("step_times_ms", "reference_step_times_ms", "chunk_first", "epoch1_step_ms", "graph_steps"):
        row[k] = m.get(k)
    times = m.get("step_times_ms")
    row["step_cv"] = float(np.std(times) / np.mean(times)) if times else np.nan
    row |= {f"overhead_{k}": (m.get("overhead_s") or {}).get(k) for k in OVERHEAD}
    return row | disturbance_columns(rec)


def _mean(pair) -> float | None:
    values = [v for v in (pair if isinstance(pair, list) else [pair]) if v is not None]
    return sum(values) / len(values) if values else None


def disturbance_columns(rec: dict) -> dict:
    """The steady-state block's host readings (HOST, None where not recorded), whether the run stayed disturbed
    and how often it was redone, with the reasons (core/disturbance.py REASONS) of its first disturbed attempt."""
    block = ((rec["metrics"] or {}).get("host_load") or {}).get("block") or {}
    gpu = block.get("gpu") or {}
    row = {"host_outside_cores": block.get("outside_cores"), "host_cpu_mhz": _mean(block.get("cpu_mhz")),
           "host_gpu_power_w": gpu.get("power_w"), "host_gpu_utilization": gpu.get("utilization"),
           "host_gpu_other_sm_util": gpu.get("other_sm_util")}
    for k in ("sm_clock_mhz", "memory_clock_mhz", "temperature_c"):
        row[f"host_gpu_{k}"] = _mean(gpu.get(k))
    earlier = rec["earlier_attempts"]
    return row | {"disturbed": rec["disturbed"] is not None,
                  "disturbed_reasons": ",".join(rec["disturbed"]["reasons"]) if rec["disturbed"] else None,
                  "redone": len(earlier),
                  "redone_reasons": ",".join((earlier[0].get("disturbed") or {}).get("reasons", [])) if earlier else None}


def table(paths) -> pd.DataFrame:
    """One row per record: config, environment, status and every declared scalar (the one reader of records),
    in the order of their run keys, whatever order `paths` came in (what is taken from a configuration's first
    record, and every sum, does not depend on how the files were listed)."""
    rows = [_row(read(p)) for p in paths]
    if not rows:
        raise RecordError("no run records to summarise")
    return pd.DataFrame(rows).sort_values(list(RUN_KEYS), kind="stable", ignore_index=True)


def main(argv: list[str] | None = None) -> None:
    """One line per record: status, configuration, step time, speedup."""
    for path in argv if argv is not None else sys.argv[1:]:
        try:
            rec = read(path)
        except RecordError as e:
            print(f"damaged        {e}", file=sys.stderr)
            continue
        c, m = rec["config"], rec["metrics"]
        print(f"{rec['status']:<14} {c['compile_mode']:<27} {c['compile_scope']:<11} {c['shape_regime']:<22} "
              f"{c['precision']:<5} bs{c['batch_size']:<5} r{c['repeat']}  step {m.get('steady_step_ms', float('nan')):8.3f} ms"
              f"  speedup {m.get('in_process_speedup', float('nan')):6.3f}  {rec.get('error') or ''}")


if __name__ == "__main__":
    main()
