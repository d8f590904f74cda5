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
_errors = config_check.schema_errors(
    config, os.path.join(workflow.basedir, "workflow/schemas/config.schema.yaml")
)
if _errors:
    sys.exit(config_check.format_errors(_errors))
validate(config, schema="../schemas/config.schema.yaml")  # fills in the defaults
DEVICE = resolve_device()
_errors = config_check.semantic_errors(
    config, devices=[DEVICE]
)  # the grid about to run
if _errors:
    sys.exit(config_check.format_errors(_errors))
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


def slurm_resources(partition, **request):
    """A job's SLURM request (profiles/slurm reads it; local runs ignore it): site settings from config `cluster`."""
    site = config["cluster"]
    wanted = {"slurm_partition": site[partition], "slurm_account": site["account"]}
    return {k: v for k, v in (wanted | request).items() if v is not None}


# CPU-only stages go to the CPU partition. A timed job takes a whole GPU and cores of its own, so that no
# other job shares its device or its cores (on a CPU grid: the cores alone, on the CPU partition).
CPU_JOB = slurm_resources("cpu_partition")
TIMED_JOB = slurm_resources(
    "gpu_partition" if DEVICE == "cuda" else "cpu_partition",
    cpus_per_task=config["cluster"]["timed_cpus"],
    gpu=1 if DEVICE == "cuda" else None,
    gpu_model=config["cluster"]["gpu_model"] if DEVICE == "cuda" else None,
    constraint=config["cluster"]["constraint"],
)
