"""A config file read strictly and the config held to its JSON schema, each problem named under the file (or
`--config`) that set its keys, without a traceback.

What a JSON schema cannot say of a number is one rule here (`number_errors`): NaN passes every bound (each
comparison with it is false), infinity passes every unbounded one, and an integer past 64 bits passes the schema
but not torch or numpy ("Overflow when unpacking long long"). A duplicate key in a YAML file, which YAML resolves
silently to the last value, is refused naming the key and both lines (`load_yaml`). Below core/config/grid.py and
core/config/config_check.py, so that both the workflow and the command line (`grid.load_config`) report alike.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from pathlib import Path

import jsonschema
import yaml

from compile_study.core.config.config_problem import Problem

MERGED = "the merged config"  # where a value came from when no single source set it
INT_LIMIT = 2**63  # torch's and numpy's integers are 64-bit signed: -2**63 <= n < 2**63


class DuplicateKey(yaml.YAMLError):
    """A key given twice in one mapping of a YAML file (str: the key and both lines)."""


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: SafeLoader's own error says so
                break
            if first is not None:
                raise DuplicateKey(f"key {key!r} is given twice (lines {first} and {line}); YAML would keep only "
                                   "the last value: delete one")
            seen[key] = line
        return super().construct_mapping(node, deep)


def load_yaml(text: str):
    """yaml.safe_load, but a key given twice in one mapping is a DuplicateKey."""
    return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader


def _key(path) -> str:
    parts = []
    for p in path:
        parts.append(f"[{p}]" if isinstance(p, int) else f".{p}")
    return "".join(parts).lstrip(".") or "(top level)"


def _numbers(node, path: tuple = ()):
    """(path, value) of every number in a config (bools are no numbers here)."""
    if isinstance(node, Mapping):
        for k, v in node.items():
            yield from _numbers(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _numbers(v, path + (i,))
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path, node


def number_errors(config: Mapping) -> list[Problem]:
    """The one rule for every number of the config, whatever its key: finite, and an integer within 64 bits."""
    out = []
    for path, value in _numbers(config):
        if isinstance(value, float) and not math.isfinite(value):
            out.append(Problem(f"{_key(path)}: {value!r} is not a finite number; give a finite one", path))
        elif isinstance(value, int) and not -INT_LIMIT <= value < INT_LIMIT:
            out.append(Problem(f"{_key(path)}: {value} is beyond the 64-bit integers torch and numpy take "
                               f"(-2**63 to 2**63 - 1)", path))
    return out


def _describe(err: jsonschema.ValidationError) -> Problem:
    if err.validator == "oneOf" and err.context:  # e.g. a number or one per device: the branch of the value's type
        fitting = [e for e in err.context if e.validator != "type"]
        if fitting:
            return _describe(fitting[0])
    path = tuple(err.absolute_path)
    key = _key(path)
    if err.validator == "additionalProperties":
        allowed = ", ".join(sorted(err.schema.get("properties", {})))
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        return Problem(f"{key}: unknown key(s) {', '.join(map(repr, extra))}; allowed: {allowed}", path + (extra[0],))
    if err.validator == "enum":
        allowed = ", ".join(map(str, err.validator_value))
        return Problem(f"{key}: {err.instance!r} is not allowed; allowed: {allowed}", path)
    if err.validator == "type":
        return Problem(f"{key}: {err.instance!r} has the wrong type; expected {err.validator_value}", path)
    why = err.schema.get("$comment") if err.validator in ("maximum", "exclusiveMaximum") else None
    return Problem(f"{key}: {err.message}" + (f" ({why})" if why else ""), path)


def _about_a_number(err: jsonschema.ValidationError, numbers: list[Problem]) -> bool:
    """Whether a schema error only repeats a number_errors problem (e.g. "inf is greater than the maximum")."""
    path = tuple(err.absolute_path)
    if err.validator in ("oneOf", "anyOf"):
        return any(p.keys[0][:len(path)] == path for p in numbers)
    return any(p.keys[0] == path for p in numbers)


@functools.lru_cache(maxsize=4)
def _validator(schema_path: str, mtime_ns: int) -> jsonschema.Draft202012Validator:
    """The schema's validator, read once per version of the file."""
    return jsonschema.Draft202012Validator(yaml.safe_load(Path(schema_path).read_text()))


def schema_errors(config: dict, schema_path: str | Path) -> list[Problem]:
    """Every number not finite or past 64 bits (number_errors), then what the schema finds besides."""
    numbers = number_errors(config)
    validator = _validator(str(schema_path), Path(schema_path).stat().st_mtime_ns)
    errors = sorted(validator.iter_errors(config), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    return numbers + [_describe(e) for e in errors if not _about_a_number(e, numbers)]


def _sets(source, path: tuple) -> bool:
    """Whether `source` gives the value at `path` (a list or scalar on the way replaces the subtree)."""
    node = source
    for part in path:
        if not isinstance(node, Mapping):
            return True
        if part not in node:
            return False
        node = node[part]
    return True


def source_of(problem, sources: list[tuple[str, Mapping]]) -> str:
    """The one source that set the problem's keys (the last to set each, as Snakemake merges), else MERGED."""
    owners = set()
    for path in getattr(problem, "keys", ()):
        owner = next((label for label, content in reversed(sources) if path and _sets(content, path)), None)
        if owner:  # a key no source sets has its schema default: the fix lies with the keys that were set
            owners.add(owner)
    return owners.pop() if len(owners) == 1 else MERGED


def format_errors(errors: list[str], sources: list[tuple[str, Mapping]] = ()) -> str:
    groups: dict[str, list[str]] = {}
    for e in errors:
        groups.setdefault(source_of(e, sources), []).append(e)
    out = []
    for label, errs in groups.items():
        head = f"{label} is invalid:"
        if label == "--config" and any("has the wrong type" in e for e in errs):
            head = ("--config is invalid (Snakemake reads the values inside a --config mapping as strings; "
                    "put them in a file given with --configfile):")
        out.append(head + "".join(f"\n  - {e}" for e in errs))
    return "\n".join(out)
