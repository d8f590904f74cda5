"""What two studies measured, established before any reproduction verdict: like is compared with like (torch-free).

    from compile_study.aggregate.compare import measured
    table = measured.data_table(stored_facts, study_facts)    # what each trained on; a column `differs`
    measured.in_short(list(table.index[table.differs]))       # ["source", "rows used", ...] or []

A speedup is a property of a model trained on some data by some protocol. aggregate/compare/compare.py judges a study's
speedups against a stored study's only where the two measured the same thing:

- data, from each study's facts.json (core/dataset/data.py `prepare`): the source, the input files' sha256, the vocabulary
  the tokenizer made, and each split's rows available and used. A difference concerns every configuration.
- protocol, per configuration, from its run records: timed steps, steps per interleaved block, warm-up steps, the
  epoch cap, the recompile limit, and the fp32 matmul precision and TF32 setting its runs had (the precision
  itself is part of the configuration). A value a record does not hold (written before it was recorded) is
  unknown, and an unknown value differs from nothing.
- the model: a stored study of another model is no yardstick at all (core/layout.py `model_difference`).

Versions and hosts (torch, Triton, driver, GPU, CPU, commit) are listed beside the verdicts, never a reason to
withhold one: a reproduction with another torch is a legitimate one.
"""

from __future__ import annotations

import pandas as pd

# the data facts compared -> how the report names them (the description is shown, not compared: its wording
# may change between versions of the code while the data stays the same)
DATA = {"source": "source", "input_sha256": "input sha256", "vocab_size": "vocabulary (tokens)",
        "train_rows": "train rows used", "train_rows_available": "train rows available",
        "eval_rows": "eval rows used", "eval_rows_available": "eval rows available"}
# a configuration's step protocol: record column -> how the report names it
PROTOCOL = {"timed_steps": "timed steps", "interleave_chunk": "steps per timed block",
            "warmup_steps": "warm-up steps", "max_epoch_steps": "epoch cap (max_epoch_steps)",
            "recompile_limit": "recompile limit", "float32_matmul_precision": "fp32 matmul precision",
            "cuda_matmul_allow_tf32": "TF32 matmuls"}
UNKNOWN = "unknown"
# how a configuration's verdict names the data facts that differ (a differing row count once: used over available)
SHORT = {"source": "source", "input_sha256": "input sha256", "vocab_size": "vocabulary", "train_rows": "rows used",
         "eval_rows": "rows used", "train_rows_available": "rows available", "eval_rows_available": "rows available"}


def _rows(value) -> str:
    return f"{int(value):,}" if value is not None else UNKNOWN


def data_of(facts: dict | None) -> dict[str, str]:
    """A study's data as the report lists it (DATA's keys and `description`); UNKNOWN without facts.json."""
    if facts is None:
        return {"description": "unknown (no facts.json)"} | {k: UNKNOWN for k in DATA}
    splits = facts.get("splits") or {}
    sha = facts.get("input_sha256") or {}
    out = {"description": facts.get("description", UNKNOWN), "source": facts.get("source", UNKNOWN),
           "input_sha256": ", ".join(f"{name} {digest}" for name, digest in sorted(sha.items()))
           or {"hf": "none (the hub's)", "synthetic": "none (generated)"}.get(facts.get("source"), "none"),
           "vocab_size": _rows(facts.get("vocab_size"))}
    for split in ("train", "eval"):
        s = splits.get(split) or {}
        out[f"{split}_rows"] = _rows(s.get("rows"))
        out[f"{split}_rows_available"] = _rows(s.get("rows_available", s.get("rows")))
    return out


def data_table(stored_facts: dict | None, study_facts: dict | None) -> pd.DataFrame:
    """Index: description and DATA's keys; columns stored, study, differs (the description never differs)."""
    table = pd.DataFrame({"stored": data_of(stored_facts), "study": data_of(study_facts)})
    table["differs"] = (table.stored != table.study) | (table.stored == UNKNOWN) | (table.study == UNKNOWN)
    table.loc["description", "differs"] = False
    return table


def in_short(keys: list[str]) -> list[str]:
    """DATA keys -> their SHORT names, each once; rows available left out where rows used already differ."""
    names = list(dict.fromkeys(SHORT[k] for k in keys))
    return [n for n in names if not (n == "rows available" and "rows used" in names)]


ENV_SETTINGS = ("float32_matmul_precision", "cuda_matmul_allow_tf32")  # None there: not recorded (or not CUDA)


def _values(column: pd.Series) -> str:
    """A configuration's distinct values of one protocol setting, as one string; a missing step setting is "none"
    (max_epoch_steps: the whole epoch), a missing environment setting UNKNOWN."""
    missing = UNKNOWN if column.name in ENV_SETTINGS else "none"
    found = {missing if v is None or v != v else str(int(v) if isinstance(v, float) else v) for v in column}
    return ", ".join(sorted(found))


def protocol_of(records: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """Per configuration (index: key), each protocol setting (PROTOCOL) its records hold."""
    columns = records.reindex(columns=list(PROTOCOL))  # a column no record has: all missing
    return columns.groupby([records[k] for k in key]).agg(_values)


def protocol_differences(stored: pd.Series, study: pd.Series) -> list[str]:
    """The protocol settings (PROTOCOL's keys) that both sides of a configuration know and differ in."""
    return [k for k in PROTOCOL if UNKNOWN not in (stored[k], study[k]) and stored[k] != study[k]]


def protocol_words(stored: pd.Series, study: pd.Series, keys: list[str]) -> list[str]:
    """'<setting> <stored> against <study>' for each of `keys`."""
    return [f"{PROTOCOL[k]} {stored[k]} against {study[k]}" for k in keys]
