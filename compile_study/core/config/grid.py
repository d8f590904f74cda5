"""The study's grid: the configured sub-grids of a device, expanded into one entry per run.

The records of one sub-grid, as Snakemake targets (to run part of a study first):

    snakemake --cores all $(python -m compile_study grid --device cuda --sub-grid modes config.yaml)
"""

from __future__ import annotations

import argparse
import copy
import functools
import itertools
from pathlib import Path

from compile_study.core import vocab
from compile_study.core.layout import Layout, study_root
from compile_study.core.record import RunKey

STEP_KEYS = ("warmup_steps", "timed_steps", "max_epoch_steps", "interleave_chunk", "recompile_limit", "phase_steps",
             "profile_steps")


_SCHEMA_IN_REPO = Path("workflow") / "schemas" / "config.schema.yaml"
# beside the package in a checkout (pip install -e .); else the study's directory (the container installs the
# package elsewhere and runs in the mounted checkout)
SCHEMA = next((p for p in (Path(__file__).resolve().parents[3] / _SCHEMA_IN_REPO, Path.cwd() / _SCHEMA_IN_REPO)
               if p.is_file()), Path(__file__).resolve().parents[3] / _SCHEMA_IN_REPO)


@functools.cache
def grid_defaults() -> dict:
    """Each sub-grid key's default, from the config schema (the one place defaults are written); none if the
    schema is not at hand (a workflow's config is validated, defaults filled, before the grid is expanded)."""
    import yaml

    if not SCHEMA.is_file():
        return {}
    props = yaml.safe_load(SCHEMA.read_text())["definitions"]["grid"]["properties"]
    return {k: v["default"] for k, v in props.items() if "default" in v}


def expand(grids: list[dict]) -> dict[RunKey, dict]:
    """Every run of the sub-grids -> that run's step settings (and its sub-grid's name, `sub_grid`).

    A configuration named by two sub-grids runs once, with the first sub-grid's settings; which
    (mode, scope, regime) combinations run at all is vocab.runs_with's rule. Where a sub-grid shares its GEMM
    search (`gemm_search: shared`), repeat 0 of each later max-autotune mode also gets `search_from`: the run
    key whose search it starts from (shared_search).
    """
    runs: dict[RunKey, dict] = {}
    for grid in grids:
        grid = grid_defaults() | grid  # stored configs from before a key existed get its default
        autotune_bs = grid.get("max_autotune_batch_sizes")
        steps = {k: grid[k] for k in STEP_KEYS} | {"sub_grid": grid["name"]}
        mine = []
        for mode, scope, bs, regime, precision, repeat in itertools.product(
            grid["compile_mode"], grid["compile_scope"], grid["batch_size"],
            vocab.expand_regimes(grid["shape_regime"], grid["bucket_sets"]), grid["precision"],
            range(grid["repeats"]),
        ):
            if mode in vocab.AUTOTUNE_MODES and autotune_bs is not None and bs not in autotune_bs:
                continue
            if not vocab.runs_with(mode, scope, regime):
                continue
            key = RunKey(mode, scope, bs, regime, precision, repeat)
            if key not in runs:
                runs[key] = steps
                mine.append(key)
        if grid.get("gemm_search") == "shared":
            for key, first in shared_search(mine, grid["compile_mode"]).items():
                runs[key] = runs[key] | {"search_from": first}
    return runs


def search_from(runs: dict[RunKey, dict], key: RunKey) -> RunKey | None:
    """The run whose GEMM search `key` starts from in an expanded grid (expand's `search_from`), or None."""
    return (runs.get(key) or {}).get("search_from")


def shared_search(keys: list[RunKey], modes: list[str]) -> dict[RunKey, RunKey]:
    """Repeat 0 of each max-autotune mode after the first in `modes` -> repeat 0 of the first one at the same
    cell (scope, batch size, regime, precision), where both are among `keys`."""
    searching = [m for m in modes if m in vocab.AUTOTUNE_MODES]
    if len(searching) < 2:
        return {}
    present = set(keys)
    out = {}
    for key in keys:
        first = key._replace(compile_mode=searching[0])
        if key.repeat == 0 and key.compile_mode in searching[1:] and first in present:
            out[key] = first
    return out


def compiles(runs: dict[RunKey, dict], n_cold: int, n_portable: int = 0) -> dict[RunKey, dict]:
    """The compile phase of an expanded grid: each compiled configuration (its repeat-0 key) -> how its cold
    compiles run: `n` of them; `alone`, a max-autotune mode that searches its GEMMs itself (its search benchmarks
    on the device: once, with the host to itself); `search_from`, the configuration whose GEMM search a mode
    starts from (gemm_search: shared: once, among the others); `portable`, how many portable starts follow its
    first cold compile (a scope one trains with: vocab.TRAINING_SCOPES; the diagnostic ones have none)."""
    out = {}
    for key, steps in runs.items():
        if key.repeat == 0 and key.compile_mode != "eager":
            first = steps.get("search_from")
            alone = key.compile_mode in vocab.AUTOTUNE_MODES and first is None
            out[key] = {"n": 1 if alone or first is not None else n_cold, "alone": alone, "search_from": first,
                        "portable": n_portable if key.compile_scope in vocab.TRAINING_SCOPES else 0}
    return out


def parity_pairs(runs) -> list[tuple[str, str]]:
    """(precision, compile mode) of each compiled mode a grid's runs use, in each precision: a parity check each."""
    return sorted({(k.precision, k.compile_mode) for k in runs if k.compile_mode != "eager"})


def record_path(device: str, key: RunKey, model: dict | None = None) -> str:
    return Layout(study_root(device, model)).record(key)


def merge(config: dict, overlay: dict) -> dict:
    """Overlay into config, recursively for mappings (lists are replaced), as Snakemake merges --configfile."""
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            merge(config[key], value)
        else:
            config[key] = value
    return config


def config_file_problem(path: str | Path) -> str | None:
    """Why a config file cannot be layered (None: a mapping of keys), naming the file: Snakemake's own message for
    an empty or non-mapping one ("Config file must be given as JSON or YAML with keys at top level") does not,
    and its loader keeps the last of a key given twice without a word."""
    import yaml

    from compile_study.core.config.config_schema import DuplicateKey, load_yaml

    path = Path(path)
    try:
        content = load_yaml(path.read_text())
    except OSError as e:
        return f"config file {path}: cannot be read ({e.strerror})"
    except DuplicateKey as e:
        return f"config file {path}: {e}"
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        return f"config file {path}: not valid YAML or JSON ({' '.join(str(e).split())})"
    if content is None:
        return f"config file {path}: it is empty; a config file maps keys to values (data:, model:, grids:, ...)"
    if not isinstance(content, dict):
        return (f"config file {path}: it holds a {type(content).__name__}, not a mapping of keys at the top level "
                "(data:, model:, grids:, ...)")
    return None


def read_config_file(path: str | Path) -> dict:
    """One config file's mapping; a file that is none stops with config_file_problem's message."""
    from compile_study.core.config.config_schema import load_yaml

    problem = config_file_problem(path)
    if problem:
        raise SystemExit(problem)
    return load_yaml(Path(path).read_text())


def load_config(paths, more=None) -> dict:
    """config.yaml, then overlays, merged as Snakemake merges them and validated (the schema's defaults filled in);
    a bad value stops with the dry run's message, under the file that set it. `more`: a check of the layers above
    (config -> its Problems, e.g. measure/checks/spec.py config_problems), run after the schema's."""
    from snakemake.utils import validate

    from compile_study.core.config.config_schema import format_errors, schema_errors

    config: dict = {}
    sources = [(str(path), read_config_file(path)) for path in paths]
    for _, content in sources:
        merge(config, copy.deepcopy(content))
    errors = schema_errors(config, SCHEMA)
    errors = errors or (more(config) if more else [])
    if errors:
        raise SystemExit(format_errors(errors, sources))
    validate(config, str(SCHEMA))
    return config


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Print the run records of a device's grid (Snakemake targets).")
    parser.add_argument("configs", nargs="+", help="config.yaml, then overlays (later files win, key by key at the top)")
    parser.add_argument("--device", required=True, choices=["cpu", "cuda"])
    parser.add_argument("--sub-grid", action="append", help="only these sub-grids (repeatable); default: all")
    args = parser.parse_args(argv)
    config = load_config(args.configs)
    for key, steps in expand(config["grids"][args.device]).items():
        if not args.sub_grid or steps["sub_grid"] in args.sub_grid:
            print(record_path(args.device, key, config["model"]))


if __name__ == "__main__":
    main()
