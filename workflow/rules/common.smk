# Helpers shared by the rules: config validation, the device's grid, file names.
import os
import sys

from snakemake.utils import validate

from compile_study import config_check, grid


def resolve_device():
    """The device whose grid runs: config `device`, or cuda when torch sees a GPU."""
    if config["device"] != "auto":
        return config["device"]
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# Bad config fails here, before any job, with one readable message and no traceback.
# Each error is reported under the file (or --config) that set the bad value.
_sources = config_check.config_sources(workflow)
_errors = config_check.schema_errors(
    config, os.path.join(workflow.basedir, "workflow/schemas/config.schema.yaml")
)
if _errors:
    sys.exit(config_check.format_errors(_errors, _sources))
validate(config, schema="../schemas/config.schema.yaml")  # fills in the defaults
DEVICE = resolve_device()  # the semantic checks concern the grid about to run
_errors = config_check.semantic_errors(config, devices=[DEVICE])
if _errors:
    sys.exit(config_check.format_errors(_errors, _sources))
# device: cuda without a GPU: a dry run still plans the GPU study; a run stops before its first job.
_device_errors = config_check.device_errors(config)
config_check.warn_before_start(_device_errors)


onstart:
    # (with a cluster executor the jobs run on hosts of their own)
    if _device_errors and workflow.local_exec:
        sys.exit(config_check.format_errors(_device_errors, _sources))


DATA_DIR = "resources/data"
DATA_FILES = [
    f"{DATA_DIR}/{split}_{part}.npy"
    for split in ("train", "eval")
    for part in ("ids", "lengths", "labels")
] + [f"{DATA_DIR}/tokenizer.json", f"{DATA_DIR}/facts.json"]
PAPER_TEMPLATE = os.path.join(workflow.basedir, "paper", "templates", "paper.md.j2")
RUN_RECORD = grid.RECORD_PATTERN.replace("{device}", DEVICE)
RUN_TRACE = RUN_RECORD.replace(
    ".json", ".trace.json.gz"
)  # torch.profiler trace of a few steady-state steps


RUNS = grid.expand(config["grids"][DEVICE])  # run key -> its sub-grid's step settings


def record_path(key):
    return RUN_RECORD.format(**dict(zip(grid.RUN_KEYS, key)))


def run_records(wildcards=None):
    return [record_path(key) for key in RUNS]


PARITY_RECORD = f"results/{DEVICE}/parity/{{precision}}/{{compile_mode}}.json"


def parity_records(wildcards=None):
    """One parity check per compiled mode and precision that the device's grid runs."""
    pairs = {(key[4], key[0]) for key in RUNS if key[0] != "eager"}
    return [PARITY_RECORD.format(precision=p, compile_mode=m) for p, m in sorted(pairs)]


def cold_run_record(wildcards):
    """Repeats after the first wait for it: they reuse the Inductor cache it populated (warm)."""
    if int(wildcards.repeat) == 0:
        return []
    return RUN_RECORD.format(**{**dict(wildcards.items()), "repeat": 0})


def inductor_cache_dir(wildcards):
    return "resources/inductor_cache/{}/{shape_regime}-{precision}-{compile_mode}-{compile_scope}-bs{batch_size}".format(
        DEVICE, **dict(wildcards.items())
    )


def run_params(wildcards):
    """The RunConfig fields of one job: its wildcards plus its sub-grid's step settings."""
    key = (
        wildcards.compile_mode,
        wildcards.compile_scope,
        int(wildcards.batch_size),
        wildcards.shape_regime,
        wildcards.precision,
        int(wildcards.repeat),
    )
    steps = {k: v for k, v in RUNS[key].items() if k != "sub_grid"}
    return dict(zip(grid.RUN_KEYS, key)) | steps | config["train"]
