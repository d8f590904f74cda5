"""The study's grid: the configured sub-grids of a device, expanded into one entry per run."""

from __future__ import annotations

import itertools

RUN_KEYS = ("compile_mode", "compile_scope", "batch_size", "shape_regime", "precision", "repeat")
ONE_SIDE_SCOPES = ("forward", "backward")  # Inductor on one side of the graph pair: default mode only
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
    """(compile_mode, compile_scope, batch_size, shape_regime, precision, repeat) -> that run's step settings.

    A configuration named by two sub-grids runs once, with the first sub-grid's settings. Eager runs
    have the scope `module` only (nothing is compiled); the forward/backward scopes run in default mode only.
    """
    runs: dict[tuple, dict] = {}
    for grid in grids:
        autotune_bs = grid.get("max_autotune_batch_sizes")
        steps = {k: grid[k] for k in STEP_KEYS} | {"sub_grid": grid["name"]}
        for mode, scope, bs, regime, precision, repeat in itertools.product(
            grid["compile_mode"], grid["compile_scope"], grid["batch_size"], shape_regimes(grid), grid["precision"],
            range(grid["repeats"]),
        ):
            if mode.startswith("max-autotune") and autotune_bs is not None and bs not in autotune_bs:
                continue
            if mode == "eager" and (regime.startswith("dynamic-") or scope != "module"):
                continue  # eager ignores `dynamic` and scope: the `dynamic`/`module` eager run is their reference
            if scope in ONE_SIDE_SCOPES and mode not in ("eager", "default"):
                continue
            runs.setdefault((mode, scope, bs, regime, precision, repeat), steps)
    return runs
