"""The paper and the reproduction report speak of a GPU kind only through its pool (aggregate/compare/pool.py), checked on
generated studies (tests/generated_studies.py) with pools of 0 to 4 other stored studies drawn around them:

- the kind: "faster than eager on <kind>" names only configurations whose pooled prediction for a new host clears
  eager's A/A band; a pool of fewer than two other studies says so and names none; where the study's cells fall
  (inside, above, below) counts every placed cell;
- the answer: no configuration is recommended whose pooled prediction holds eager's band, and the answer speaks
  for the kind only where the pool has two or more other studies;
- the report: its first sentence says a pool of fewer than two other studies is too few, and otherwise counts
  every configuration the pool holds.
"""

from __future__ import annotations

import re
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compile_study.aggregate.compare import pool
from compile_study.core import record
from compile_study.report import build as report
from compile_study.report.compare import pool_report

from . import generated_studies as gen
from .paper_reading import texts

KIND = "NVIDIA H200"  # the generated GPU studies' device name
SETTINGS = settings(max_examples=25, deadline=None, database=None, derandomize=True)


def stored_pool(others: int, tau: float, seed: int):
    """summary -> the stored estimate's dict: `others` studies whose cells are this study's, each configuration
    moved by a host effect drawn with SD tau (log units) and with a standard error of its own."""
    def make(summary) -> dict:
        rng = np.random.default_rng(seed)
        mine = pool.cells_from_summary(summary)
        cells = []
        for i in range(others):
            shifted = mine.assign(mean=mine["mean"] + rng.normal(0, tau, len(mine)), protocol="same",
                                  study=f"reference/other{i}")
            cells += shifted.to_dict("records")
        return {"pools": {KIND: {"studies": [f"reference/other{i}" for i in range(others)], "cells": cells}}}
    return make


def _key(r: dict) -> tuple:
    return r["compile_mode"], r["compile_scope"], r["shape_regime"], r["precision"], int(r["batch_size"])


def _named(rows: list[dict], verdict: str) -> set[tuple]:
    return {_key(r) for r in rows if r["verdict"] == verdict}


def _config(c: dict) -> tuple:
    return c["mode"], c["scope"], c["regime"], c["precision"], c["batch"]


@pytest.mark.property
@SETTINGS
@given(spec=gen.studies(device="cuda"), others=st.integers(0, 4), tau=st.sampled_from([0.0, 0.02, 0.15]),
       seed=st.integers(0, 2 ** 16))
def test_the_paper_speaks_of_the_kind_only_through_its_pool(spec, others, tau, seed):
    paper = gen.paper(spec, pool=stored_pool(others, tau, seed))
    carries = next((t for t in texts(paper.report) if (t.file, t.macro) == ("setup", "carries")), None)
    words = carries.data["pool"] if carries else None
    if words is None:
        return
    rows = report.pool_in(paper.summary, KIND, stored_pool(others, tau, seed)(paper.summary), None)["pooled"]
    if others < 2:
        assert "too few to say what a new host of the kind would measure" in paper.markdown
        assert f"On {KIND}, the prediction clears" not in paper.markdown
    else:
        faster = {_config(c) for c in words["faster"]}
        kind = [r for r in rows if r["compile_mode"] != "eager"]
        assert faster <= _named(kind, "faster")  # the pooled prediction clears eager's band
        for r in kind:
            if _key(r) in faster:
                assert np.exp(r["pi_low"]) > r["margin"]
        assert sum(words["places"].values()) == words["configs"]
    modes = next((t for t in texts(paper.report) if (t.file, t.macro) == ("conclusions", "modes")), None)
    if modes is not None:
        assert modes.data["pooled"] == others
        held = _named(rows, "within eager's band") if others >= 2 else set()
        for a in modes.data["answers"]:
            assert a["pooled"] == (others >= 2)
            named = [c for c in [a["fastest"], *a["cheapest"].values()] if c]
            assert not {_config(c) for c in named} & held


@pytest.mark.property
@SETTINGS
@given(spec=gen.studies(device="cuda"), others=st.integers(0, 4), seed=st.integers(0, 2 ** 16))
def test_the_report_s_first_sentence_says_a_pool_of_fewer_than_two_is_too_few(spec, others, seed):
    with tempfile.TemporaryDirectory() as tmp:
        records = gen._read(gen.records(spec), tmp, record.table)
    summary = gen.paper(spec).summary
    against = pool_report.judge(records, stored_pool(others, 0.02, seed)(summary), "results/cuda")
    first = pool_report.headline(against)
    if others < 2:
        assert "too few to say how hosts of the kind differ" in first
    else:
        t = against.table
        assert f"of {len(t)} configurations" in first
        counts = re.findall(r"(\d+) (?:lie inside|above and|below it)", first)
        assert sum(int(x) for x in counts) == len(t) and len(counts) == 3
