"""The data a study will train on, checked at the dry run, before any job (torch-free).

Two refusals that keep a study from training on the synthetic stand-in without being asked to:
- a csv_dir the user named (any but the default place beside the clone) that holds no test.csv;
- a study whose yardstick trained on real text while it would itself fall back to the stand-in (its
  reproduction report could only say "not comparable": aggregate/compare/measured.py).
config_check.py runs the first among the config's errors; the workflow runs the second once it knows the
yardstick (workflow/rules/common.smk).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import yaml

from compile_study.core.config import grid
from compile_study.core.dataset.ag_news_csv import CSV_LAYOUT, csv_files
from compile_study.core.dataset.corpus import DataError
from compile_study.core.dataset.data import read_facts
from compile_study.core.dataset.sources import is_real_data, synthetic_fallback
from compile_study.core.layout import Layout


@functools.cache
def default_csv_dir() -> str:
    """Where source auto looks for AG News' CSV unless told (the schema's default: ../shared/data/ag_news)."""
    schema = yaml.safe_load(grid.SCHEMA.read_text())
    return schema["properties"]["data"]["properties"]["csv_dir"]["default"]


def csv_dir_named(data: dict) -> bool:
    """Whether data.csv_dir names a directory of the user's: any but the default place, which source auto only
    looks in (a directory the user named must hold the data)."""
    return bool(data["csv_dir"]) and Path(data["csv_dir"]) != Path(default_csv_dir())


def _csv_dir_missing(csv_dir: str) -> str | None:
    """Why csv_dir holds no test.csv to read (None: it does, or a file there is broken, which is named apart)."""
    path = Path(csv_dir)
    if not path.exists():
        return f"{csv_dir!r} does not exist"
    if not path.is_dir():
        return f"{csv_dir!r} is not a directory"
    try:
        return None if "test.csv" in csv_files(path) else f"{csv_dir!r} has no test.csv"
    except DataError:
        return None


def named_csv_dir_problems(data: dict) -> list[tuple[tuple, str]]:
    """(config key path, message) for source auto with a csv_dir the user named that holds no data: an error,
    never a silent synthetic run."""
    if data["source"] != "auto" or not csv_dir_named(data):
        return []
    why = _csv_dir_missing(data["csv_dir"])
    if why is None:
        return []
    return [(("data", "csv_dir"), f"data.csv_dir: {why}; a directory named in data.csv_dir must hold the data "
             f"({CSV_LAYOUT}), else source auto would fall back to the SYNTHETIC stand-in: fix the path, leave "
             f"data.csv_dir at its default ({default_csv_dir()}) to let source auto look there, or set data.source: "
             "synthetic to run on the stand-in on purpose")]


def yardstick_refusal(config: dict, device: str, yardstick: str | None, data_dir: str) -> str | None:
    """Why a study stops at its dry run, before any job: its yardstick (a stored study's directory) trained on real
    text, and it would train on the synthetic stand-in (source auto finding neither csv_dir's test.csv nor the
    hub), which its reproduction report could only call "not comparable". None where there is no yardstick, the
    yardstick trained on the stand-in, the data is real, or it was prepared from real text already (data_dir)."""
    theirs = read_facts(Layout(str(yardstick)).facts) if yardstick else None
    if not is_real_data(theirs) or is_real_data(read_facts(Path(data_dir) / "facts.json")):
        return None
    data = config["data"]
    why = synthetic_fallback(data)
    if not why:
        return None
    where = data["csv_dir"]
    beside = " beside the clone" if where and Path(where) == Path(default_csv_dir()) else ""
    put = (f"  - put AG News' test.csv (alone, or beside train.csv) in {where}{beside} ({os.path.abspath(where)}), "
           "or\n" if where else "")
    return (f"data: this study would train on the SYNTHETIC stand-in, not AG News (source auto: {'; '.join(why)}), "
            f"while its yardstick {config['yardstick'][device]} trained on {theirs.get('description')}: its "
            "reproduction report could only say \"not comparable\". Stopped before any job. Give it the data, then "
            f"run again:\n{put}"
            "  - name the directory that holds it in a config file of your own, layered over the study's "
            "(--configfile config.yaml mine.yaml, mine.yaml: data: {csv_dir: /path/to/ag_news}), or\n"
            f"  - let it reach the Hugging Face hub ({data['hf_name']}; HF_HUB_OFFLINE unset).\n"
            "Or run on synthetic data on purpose with data.source: synthetic (its reproduction report then lists the "
            f"difference and gives no verdicts), or without a reproduction check: yardstick: {{{device}: null}}.")
