"""Readable config errors, found before any job runs.

The workflow refuses a config file with a key given twice (`file_problems`), calls `schema_errors`
(core/config/config_schema.py: every number finite and within 64 bits, then types, enums, ranges, required and
unknown keys, from the JSON schema), then Snakemake's `validate` (which fills in the defaults), then
`semantic_errors` (what a schema cannot say, the grid's expansion included: core/config/grid_errors.py,
core/config/plug_errors.py, the data and sizes), and `device_errors` (the one check that imports torch: a warning at
load, so that a dry run may plan a GPU study anywhere, and an error when a run starts). Each error names the
key, the bad value and the fix; config_schema's `format_errors` reports all of them at once, each under the file
(or `--config`) that set the bad value (`config_sources` here, `source_of` there), without a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

from compile_study.core.config import grid, sizes
from compile_study.core.config.config_problem import Problem
from compile_study.core.config.config_schema import source_of
from compile_study.core.config.data_check import csv_dir_named, named_csv_dir_problems
from compile_study.core.config.grid_errors import grid_errors
from compile_study.core.config.plug_errors import model_errors, plug_grid_errors
from compile_study.core.dataset.ag_news_csv import CSV_LAYOUT, KNOWN_SHA256, csv_files, csv_sha256, read_ag_news_csv
from compile_study.core.dataset.corpus import DataError
from compile_study.core.dataset.sources import split_labels
from compile_study.core.dataset.splits import check_split


def semantic_errors(config: dict, devices: list[str] | None = None) -> list[Problem]:
    """Checks across keys (run after the schema's defaults are filled in), for the grids of `devices`
    (default: all); the workflow checks the grid it is about to run."""
    out = []
    model = config["model"]
    if model["d_model"] % model["n_heads"]:
        out.append(Problem(f"model.d_model: {model['d_model']} is not divisible by model.n_heads ({model['n_heads']})",
                           ("model", "d_model"), ("model", "n_heads")))
    data = data_errors(config["data"]) + [Problem(text, path) for path, text in named_csv_dir_problems(config["data"])]
    out += data + model_errors(model)
    for device, grids in config["grids"].items():
        if devices is None or device in devices:
            out += grid_errors(device, grids, model["max_len"])
            out += plug_grid_errors(device, grids, model)
    if not data:  # batches against rows of data that is itself wrong would only repeat it
        out += [Problem(text, path) for path, text in sizes.fill_problems(config, devices)]
    return out + [Problem(text, path) for path, text in sizes.problems(config, devices)]


def data_errors(data: dict) -> list[Problem]:
    """The CSV files of source csv are there and readable, and AG News' or parsed here (naming file and line);
    a split made from the data leaves both sides non-empty."""
    if data["source"] == "csv":
        csv_dir = Path(data["csv_dir"] or "")
        if not data["csv_dir"] or not csv_dir.is_dir():
            return [Problem(f"data.csv_dir: {data['csv_dir']!r} is not a directory (needed by data.source: csv)",
                            ("data", "csv_dir"))]
        try:
            files = csv_files(csv_dir)
            if "test.csv" not in files:
                return [Problem(f"data.csv_dir: {str(csv_dir)!r} has no test.csv ({CSV_LAYOUT})", ("data", "csv_dir"))]
            sha = csv_sha256(files, data.get("verify_sha256", True))
            for name in [n for n in files if sha[n] != KNOWN_SHA256[n] and len(files) == 2]:
                read_ag_news_csv(files[name])  # not AG News' own: parsed now (test.csv alone is, below)
        except DataError as e:
            return [Problem(f"data.csv_dir: {e}", ("data", "csv_dir"))]
    try:  # cheap: reads test.csv's labels or draws the synthetic ones; no tokenizer
        found = split_labels(data)
    except DataError as e:  # a malformed test.csv: its file and line
        return [Problem(f"data.csv_dir: {e}", ("data", "csv_dir"))]
    if found is None:  # the split is given (hub, train.csv + test.csv) or decided when the data is prepared
        return []
    try:
        check_split(*found, data["eval_fraction"])
    except DataError as e:
        return [Problem(str(e), ("data", "eval_fraction"), ("data", "synthetic_rows"), ("data", "csv_dir"))]
    return []


def data_warnings(data: dict) -> list[Problem]:
    """What source auto would pass over without a word: the default csv_dir that is not there or has no test.csv,
    or a csv_dir holding a file that cannot be read (the hub may still answer, so these are warnings; a csv_dir
    the user named that holds no data is an error: named_csv_dir_errors)."""
    if data["source"] != "auto" or not data["csv_dir"]:
        return []
    csv_dir = Path(data["csv_dir"])
    fallback = ("with data.source auto the study falls back to the SYNTHETIC stand-in (not AG News) when the hub "
                "does not answer")
    named = csv_dir_named(data)  # then no data there is an error (named_csv_dir_errors), not a warning
    if not csv_dir.is_dir():
        return [] if named else [Problem(f"data.csv_dir: {data['csv_dir']!r} is not a directory; {fallback}",
                                         ("data", "csv_dir"))]
    try:
        files = csv_files(csv_dir)
    except DataError as e:
        return [Problem(f"data.csv_dir: {e}; data preparation stops there when the hub does not answer",
                        ("data", "csv_dir"))]
    if "test.csv" not in files and not named:
        return [Problem(f"data.csv_dir: {data['csv_dir']!r} has no test.csv; {fallback}", ("data", "csv_dir"))]
    return []


def device_errors(config: dict) -> list[Problem]:
    """`device: cuda` on a host where torch sees no GPU; not checked where torch is not installed beside
    Snakemake (jobs in a container find out for themselves)."""
    if config["device"] != "cuda":
        return []
    try:
        import torch
    except ImportError:
        return []
    if torch.cuda.is_available():
        return []
    build = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
    fix = "use device: auto or cpu"
    if torch.version.cuda:
        fix += ", or check the driver (nvidia-smi) and CUDA_VISIBLE_DEVICES"
    return [Problem(f"device: 'cuda', but torch sees no CUDA GPU (torch {torch.__version__}, {build}); {fix}",
                    ("device",))]


def refuse(message: str | None) -> None:
    """Stop the workflow with `message` (no traceback) where there is one."""
    if message:
        sys.exit(message)


def warn_before_start(problems: list[str]) -> None:
    """Problems a dry run may plan around (the workflow's `onstart` stops a real run on them)."""
    for p in problems:
        print(f"warning: {p} (a dry run plans the study; a run stops before its first job)", file=sys.stderr)


def warn(problems: list[Problem], sources: list[tuple[str, Mapping]] = ()) -> None:
    """Problems a study can run with (e.g. data_warnings), each under the source that set its keys."""
    for p in problems:
        print(f"warning: {p} (set in {source_of(p, sources)})", file=sys.stderr)


def config_files(workflow) -> list[Path]:
    """The config files in Snakemake's merge order (later wins): the Snakefile's `configfile:`, then the
    --configfile files ([] if this Snakemake does not say)."""
    try:
        settings = workflow.config_settings
        overlays = [Path(p) for p in settings.configfiles]
        own = [] if settings.replace_workflow_config else [
            Path(p) for p in workflow.configfiles if Path(p).absolute() not in overlays]
    except AttributeError:
        return []
    return own + overlays


def file_problems(workflow) -> str | None:
    """What Snakemake's own loader lets through in the config files (a key given twice keeps the last value),
    each named with its file (None: every file is a strict mapping)."""
    return "\n".join(filter(None, map(grid.config_file_problem, config_files(workflow)))) or None


def config_sources(workflow) -> list[tuple[str, Mapping]]:
    """The config's sources in Snakemake's merge order (later wins): the config files (config_files), then
    --config. Empty if this Snakemake does not say (messages then name MERGED)."""
    try:
        sources = [(_display(p), yaml.safe_load(p.read_text()) or {}) for p in config_files(workflow)]
        overrides = dict(workflow.config_settings.config)
    except (AttributeError, OSError, yaml.YAMLError):
        return []
    return sources + ([("--config", overrides)] if overrides else [])


def _display(path: Path) -> str:
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
