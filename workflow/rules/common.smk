# Helpers shared by the rules: config validation, the device's grid, file names.
import itertools
import os

from snakemake.utils import validate


validate(config, schema="../schemas/config.schema.yaml")


def resolve_device():
    """The device whose grid runs: config `device`, or cuda when torch sees a GPU."""
    if config["device"] != "auto":
        return config["device"]
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


DEVICE = resolve_device()
GRID = config["grids"][DEVICE]
DATA_DIR = "resources/data"
DATA_FILES = [
    f"{DATA_DIR}/{split}_{part}.npy"
    for split in ("train", "eval")
    for part in ("ids", "lengths", "labels")
] + [f"{DATA_DIR}/tokenizer.json", f"{DATA_DIR}/facts.json"]
PAPER_TEMPLATE = os.path.join(workflow.basedir, "paper", "templates", "paper.md.j2")
RUN_RECORD = (
    f"results/{DEVICE}/runs/{{shape_regime}}/{{precision}}/{{compile_mode}}/bs{{batch_size}}/r{{repeat}}.json"
)


def grid_configs():
    """Every (compile_mode, batch_size, shape_regime, precision, repeat) of the device's grid."""
    autotune_bs = GRID.get("max_autotune_batch_sizes")
    for mode, bs, regime, precision, repeat in itertools.product(
        GRID["compile_mode"],
        GRID["batch_size"],
        GRID["shape_regime"],
        GRID["precision"],
        range(GRID["repeats"]),
    ):
        if mode == "max-autotune" and autotune_bs is not None and bs not in autotune_bs:
            continue
        yield dict(
            compile_mode=mode,
            batch_size=bs,
            shape_regime=regime,
            precision=precision,
            repeat=repeat,
        )


def run_records(wildcards=None):
    return [RUN_RECORD.format(**c) for c in grid_configs()]


def cold_run_record(wildcards):
    """Repeats after the first wait for it: they reuse the Inductor cache it populated (warm)."""
    if int(wildcards.repeat) == 0:
        return []
    return RUN_RECORD.format(**{**dict(wildcards.items()), "repeat": 0})


def inductor_cache_dir(wildcards):
    return "resources/inductor_cache/{}/{shape_regime}-{precision}-{compile_mode}-bs{batch_size}".format(
        DEVICE, **dict(wildcards.items())
    )


def run_params(wildcards):
    """The RunConfig fields of one job: its wildcards plus the grid's step counts."""
    return dict(
        compile_mode=wildcards.compile_mode,
        batch_size=int(wildcards.batch_size),
        shape_regime=wildcards.shape_regime,
        precision=wildcards.precision,
        repeat=int(wildcards.repeat),
        warmup_steps=GRID["warmup_steps"],
        timed_steps=GRID["timed_steps"],
        max_epoch_steps=GRID["max_epoch_steps"],
        lr=config["train"]["lr"],
        seed=config["train"]["seed"],
    )
