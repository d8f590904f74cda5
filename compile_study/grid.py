"""The study's grid: the configured sub-grids of a device, expanded into one entry per run."""

from __future__ import annotations

import itertools

RUN_KEYS = ("compile_mode", "batch_size", "shape_regime", "precision", "repeat")
STEP_KEYS = ("warmup_steps", "timed_steps", "max_epoch_steps", "interleave_chunk", "recompile_limit")


def shape_regimes(grid: dict) -> list[str]:
    """The grid's regimes, `bucketed` expanded to one regime per bucket set (bucketed-32-64-128)."""
    out = []
    for regime in grid["shape_regime"]:
        if regime == "bucketed":
            out += ["bucketed-" + "-".join(map(str, edges)) for edges in grid["bucket_sets"]]
        else:
            out.append(regime)
    return out


def expand(grids: list[dict]) -> dict[tuple, dict]:
    """(compile_mode, batch_size, shape_regime, precision, repeat) -> that run's step settings.

    A configuration named by two sub-grids runs once, with the first sub-grid's settings.
    """
    runs: dict[tuple, dict] = {}
    for grid in grids:
        autotune_bs = grid.get("max_autotune_batch_sizes")
        steps = {k: grid[k] for k in STEP_KEYS} | {"sub_grid": grid["name"]}
        for mode, bs, regime, precision, repeat in itertools.product(
            grid["compile_mode"], grid["batch_size"], shape_regimes(grid), grid["precision"], range(grid["repeats"])
        ):
            if mode == "max-autotune" and autotune_bs is not None and bs not in autotune_bs:
                continue
            if mode == "eager" and regime.startswith("dynamic-"):
                continue  # eager ignores `dynamic`: the `dynamic` eager run is these regimes' reference
            runs.setdefault((mode, bs, regime, precision, repeat), steps)
    return runs
