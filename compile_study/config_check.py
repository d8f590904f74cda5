"""Readable config errors, found before any job runs.

The workflow calls `schema_errors` (types, enums, ranges, required and unknown keys, from the JSON
schema), then Snakemake's `validate` (which fills in the defaults), then `semantic_errors` (what
a schema cannot say). Each error names the key, the bad value and what is allowed; all of them
are reported at once, without a traceback.
"""

from __future__ import annotations

from pathlib import Path

import jsonschema
import yaml


def _key(path) -> str:
    parts = []
    for p in path:
        parts.append(f"[{p}]" if isinstance(p, int) else f".{p}")
    return "".join(parts).lstrip(".") or "(top level)"


def _describe(err: jsonschema.ValidationError) -> str:
    key = _key(err.absolute_path)
    if err.validator == "additionalProperties":
        allowed = ", ".join(sorted(err.schema.get("properties", {})))
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        return f"{key}: unknown key(s) {', '.join(map(repr, extra))}; allowed: {allowed}"
    if err.validator == "enum":
        return f"{key}: {err.instance!r} is not allowed; allowed: {', '.join(map(str, err.validator_value))}"
    if err.validator == "type":
        return f"{key}: {err.instance!r} has the wrong type; expected {err.validator_value}"
    return f"{key}: {err.message}"


def schema_errors(config: dict, schema_path: str | Path) -> list[str]:
    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    return [_describe(e) for e in errors]


def semantic_errors(config: dict, devices: list[str] | None = None) -> list[str]:
    """Checks across keys (run after the schema's defaults are filled in), for the grids of `devices`
    (default: all); the workflow checks the grid it is about to run."""
    out = []
    model, data = config["model"], config["data"]
    if model["d_model"] % model["n_heads"]:
        out.append(f"model.d_model: {model['d_model']} is not divisible by model.n_heads ({model['n_heads']})")
    if data["source"] == "csv":
        csv_dir = Path(data["csv_dir"] or "")
        if not data["csv_dir"] or not csv_dir.is_dir():
            out.append(f"data.csv_dir: {data['csv_dir']!r} is not a directory (needed by data.source: csv)")
        elif not (csv_dir / "test.csv").is_file():
            out.append(f"data.csv_dir: {str(csv_dir)!r} has no test.csv (AG News CSV layout: train.csv and/or test.csv)")
    for device, grids in config["grids"].items():
        if devices is not None and device not in devices:
            continue
        names = [g["name"] for g in grids]
        if len(set(names)) != len(names):
            out.append(f"grids.{device}: sub-grid names must be unique, got {names}")
        for i, g in enumerate(grids):
            key = f"grids.{device}[{i}]"
            for j, edges in enumerate(g["bucket_sets"] if "bucketed" in g["shape_regime"] else []):
                if edges != sorted(set(edges)):
                    out.append(f"{key}.bucket_sets[{j}]: {edges} must be strictly increasing")
                elif edges[-1] != model["max_len"]:
                    out.append(f"{key}.bucket_sets[{j}]: {edges} must end at model.max_len ({model['max_len']}) "
                               "so that every sequence fits a bucket")
            extra = set(g.get("max_autotune_batch_sizes") or []) - set(g["batch_size"])
            if extra:
                out.append(f"{key}.max_autotune_batch_sizes: {sorted(extra)} are not in batch_size {g['batch_size']}")
    return out


def format_errors(errors: list[str]) -> str:
    return "config.yaml is invalid:\n" + "\n".join(f"  - {e}" for e in errors)
