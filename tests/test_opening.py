"""The three sentences the README opens with follow the pools' verdicts and the claims across kinds: they are decided
by aggregate/compare/opening.py and worded by report/docs/opening.py, here fed copies of the stored inputs with one
verdict or code changed, and inputs of their own."""

from __future__ import annotations

import copy
import re

import pytest

from compile_study.aggregate.compare import opening as decided
from compile_study.report.docs import opening, project_docs

from .conftest import REPO

pytestmark = pytest.mark.unit
H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"
RO512 = (512, "reduce-overhead", "module")


@pytest.fixture(scope="module")
def stored() -> tuple[dict, dict]:
    """The project's pools (each kind's stored studies and pool.ratios) and kinds.json, as from_project reads them."""
    import json

    from compile_study.aggregate.compare import hosts, pool
    from compile_study.core.layout import host_effect_path, kinds_path

    s = hosts.load(host_effect_path(REPO))
    pools = {k: {"studies": pool.studies(s, k), "cells": pool.ratios(s, k)} for k in (H100, H200)}
    return pools, json.loads(kinds_path(REPO).read_text())


def words(pools: dict, across: dict) -> list[str]:
    return opening.sentences(decided.decide(pools, across))


def test_the_stored_opening_quotes_the_largest_pool_and_its_verdicts(stored):
    pools, across = stored
    found = decided.decide(*stored)
    assert [k["kind"] for k in found["kinds"]] == [H200, H100] and found["batches"] == [32, 512]
    bought, held, claims = opening.sentences(found)
    for batch in (32, 512):  # the quoted cell: faster on the pool, its pooled speedup and prediction as printed
        c = pools[H200]["cells"][found["shown"][batch]]
        assert c["verdict"] == "faster" and f"batch-{batch} training step {c['speedup']:.2f}× faster" in bought
        assert f"{c['low']:.2f}–{c['high']:.2f}×" in bought
    assert bought.startswith(f"Pooled over {len(pools[H200]['studies'])} stored H200 studies")
    banded = [k for k, c in pools[H200]["cells"].items() if c["verdict"] == "within eager's band"]
    assert (512, "default", "module") in banded and "`default` at batch 512 (H200, H100)" in held
    assert held.startswith("Not shown faster than eager on a new host (within eager's band): ")
    every = sum(c["everywhere"] for c in across["claims"])
    assert claims.startswith(f"Of the {len(across['claims'])} claims the H100 and H200 papers state, {every} hold on "
                             "both kinds")
    assert all(len(s.split()) <= 40 for s in (bought, held, claims))


def test_a_verdict_changed_in_the_pool_changes_the_sentences(stored):
    pools, across = stored
    before = words(pools, across)
    banded = copy.deepcopy(pools)
    banded[H200]["cells"][RO512]["verdict"] = "within eager's band"
    after = words(banded, across)
    assert after[0] != before[0] and "`reduce-overhead` at batch 512 (H200)" in after[1]
    shown = decided.decide(banded, across)["shown"][512]
    assert shown != RO512 and banded[H200]["cells"][shown]["verdict"] == "faster"
    assert f"{banded[H200]['cells'][RO512]['speedup']:.2f}× faster" not in after[0]  # never worded as faster
    slower = copy.deepcopy(pools)
    slower[H100]["cells"][RO512]["verdict"] = "slower"
    said = words(slower, across)
    assert f"{pools[H100]['cells'][RO512]['speedup']:.2f}× (slower)" in said[0]
    assert "slower than eager on a new host: `reduce-overhead` at batch 512 (H100)" in said[1]


def test_a_cell_within_eager_s_band_is_never_worded_as_faster():
    cell = lambda x, verdict, k=4: {"speedup": x, "low": x * 0.8, "high": x * 1.2, "k": k, "verdict": verdict}  # noqa: E731
    pools = {"GPU A1": {"studies": ["a", "b", "c", "d"], "cells": {
        (8, "reduce-overhead", "module"): cell(3.0, "within eager's band"), (8, "default", "module"): cell(1.3, "faster"),
        (8, "default", "step-graph"): cell(9.0, "faster", k=1), (64, "default", "module"): cell(2.0, "within eager's band")}},
        "GPU B2": {"studies": ["e", "f"], "cells": {(8, "default", "module"): cell(1.1, "within eager's band", k=2)}},
        "GPU C3": {"studies": ["g"], "cells": {(8, "default", "module"): cell(5.0, "faster")}}}  # one study: no pool
    bought, held, claims = words(pools, None)
    assert bought == ("Pooled over 4 stored A1 studies, compiling with `default` makes a batch-8 training step 1.30× "
                      "faster than eager (a new host: 1.04–1.56×) and no configuration makes a batch-64 step faster "
                      "than eager on a new host; on 2 stored B2 studies, 1.10× (within eager's band).")
    assert held == ("Not shown faster than eager on a new host (within eager's band): `default` at batch 8 (B2), "
                    "`reduce-overhead` at batch 8 (A1) and `default` at batch 64 (A1).")
    assert not re.search(r"3\.00×|2\.00×|1\.10× faster|C3", bought + held)
    assert claims == "The stored studies hold fewer than two GPU kinds, so no claim is judged across kinds yet."
    assert words({}, None) == ["No GPU kind has two or more stored studies yet, so nothing is pooled across hosts."]


def test_the_claims_sentence_counts_the_codes_of_kinds_json(stored):
    pools, across = stored
    changed = copy.deepcopy(across)
    held = next(c for c in changed["claims"] if c["everywhere"])
    held["codes"][H200], held["everywhere"] = "does-not-hold", False
    every = sum(c["everywhere"] for c in changed["claims"])
    claims = words(pools, changed)[2]
    others = len(changed["claims"]) - every
    assert f", {every} hold on both kinds; of the other {others}, 1 does not hold on one of them and " in claims
    assert opening.short_names([H100, H200, "NVIDIA H100 PCIe"]) == {H100: H100, H200: "H200",
                                                                     "NVIDIA H100 PCIe": "NVIDIA H100 PCIe"}


def test_the_results_quote_no_reproduction_against_a_study_no_longer_stored(tmp_path):
    """A stored study's reproduction report against a yardstick since removed from reference/ is not quoted in the
    README (its verdict was under the rule of its day); with the yardstick stored it is."""
    from compile_study.core.layout import Layout
    from compile_study.report.docs.readme import reproduction_verdict

    study = next(p.parent for p in sorted((REPO / "reference").glob("*/reproduction.md")))
    yardstick, _ = reproduction_verdict((study / "reproduction.md").read_text())
    assert project_docs._reproduced(study, tmp_path) == []
    (tmp_path / yardstick / "runs").mkdir(parents=True)
    (tmp_path / yardstick / "config.yaml").write_text("{}\n")
    assert project_docs._reproduced(study, tmp_path)[0].startswith(
        f"Its [reproduction report]({Layout(str(study)).reproduction('md')}) against `{yardstick}`: ")


def test_the_readme_s_line_on_the_host_effect_gives_each_kind_s_largest_class_and_the_leave_one_out_counts():
    from compile_study.aggregate.compare import hosts
    from compile_study.core.layout import host_effect_path
    from compile_study.report.docs import reproduced

    stored = hosts.load(host_effect_path(REPO))
    line = reproduced.hosts_line(stored)
    names = opening.short_names(list(stored["kinds"]))
    for kind, k in stored["kinds"].items():
        largest = max(v["sd_ratio"] for v in k["classes"].values() if v["sd"] is not None and v["sd"] == v["sd"])
        shown = f"{float(f'{100 * (largest - 1):.2g}'):g}"  # two significant digits, as numbers.percent2
        assert f"±{shown}% on {names[kind]} ({len(k['studies'])} stored studies)" in line
        assert f"{k['leave_one_out']['changed']} of {k['leave_one_out']['judged']}" in line
    assert line in (REPO / "README.md").read_text() and all(len(s.split()) <= 40 for s in line.split(". "))
    assert reproduced.hosts_line({}).startswith("No kind has two stored studies of the built-in model")
