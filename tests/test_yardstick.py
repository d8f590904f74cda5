"""What a study is compared with (compile_study/aggregate/compare/measured.py, core/layout.py, core/config/data_check.py): like
with like (data and protocol, else "not comparable"), the yardstick a study may have, and no silent run on the
synthetic stand-in under a real-data yardstick. The rule itself: tests/test_compare.py."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml

from compile_study.aggregate.compare import compare as cmp
from compile_study.core import layout
from compile_study.core.config import data_check, grid
from compile_study.core.dataset.ag_news_csv import KNOWN_SHA256
from compile_study.report.compare import reproduction

from .conftest import GPU_REFERENCE, REPO
from .test_compare import NAMES, STORED, copy_study


@pytest.fixture(scope="module")
def stored() -> cmp.Study:
    return cmp.load(STORED)


@pytest.mark.dag
def test_the_dag_refuses_a_yardstick_of_another_device_and_skips_a_study_that_is_its_own(tmp_path):
    """(A live GPU study plans rule reproduction against the committed study: test_workflow's dry run.)"""
    from .test_workflow import job_counts, snakemake

    config = ["--configfile", str(REPO / "config.yaml")]
    wrong = snakemake("-n", "--config", "device=cpu", f"yardstick={{cpu: {STORED}}}", *config, cwd=tmp_path)
    assert wrong.returncode != 0 and "config yardstick.cpu" in wrong.stderr
    assert "is a cuda study and this is a cpu study" in wrong.stderr
    copy = tmp_path / "stored"  # a copy of the yardstick is the yardstick: nothing to compare
    shutil.copytree(STORED, copy, ignore=shutil.ignore_patterns(".snakemake", ".latex", "*.trace.json.gz"))
    against = f"yardstick={{cuda: {STORED}}}"
    itself = snakemake("-n", "--config", against, cwd=copy)
    assert itself.returncode == 0 and "reproduction" not in job_counts(itself.stdout), itself.stderr
    # a stored study whose yardstick is no longer stored keeps the report it has, and its README quotes it
    gone = snakemake("-n", "--config", "yardstick={cuda: reference/no-longer-stored}", cwd=copy)
    assert gone.returncode == 0 and "reproduction" not in job_counts(gone.stdout), gone.stderr
    next((copy / "runs").rglob("r2.json")).unlink()  # now another stored GPU study, rebuilt with --directory
    for report in copy.glob("reproduction.*"):
        report.unlink()  # (the report the reference keeps is against the study it replaced)
    other = snakemake("-n", "--config", against, cwd=copy)
    assert other.returncode == 0 and job_counts(other.stdout)["reproduction"] == 1, other.stderr
    # a study of another model (here a built-in one of another width) is no yardstick: a warning, no report
    (tmp_path / "narrower.yaml").write_text("model: {d_model: 128}\n")
    plugged = snakemake("-n", "--configfile", str(copy / "config.yaml"), str(tmp_path / "narrower.yaml"),
                        "--config", against, cwd=copy)
    assert plugged.returncode == 0 and "reproduction" not in job_counts(plugged.stdout), plugged.stderr
    warning = "differs from this study's (the built-in model) in d_model; no reproduction report"
    assert warning in plugged.stdout + plugged.stderr


@pytest.mark.unit
def test_a_study_of_another_model_is_named_by_the_keys_it_differs_in():
    ours = layout.Layout(str(STORED)).stored_records()[0]
    model = json.loads(open(ours).read())["config"]["model"]
    assert layout.model_difference(STORED, model) is None
    assert layout.model_difference(STORED, model | {"vocab_size": 1, "n_classes": 9}) is None  # the data's sizes
    bert = model | {"name": "hf-bert", "hf_config": {"model_type": "bert"}}
    assert layout.model_difference(STORED, bert) == (
        "its model (the built-in model) differs from this study's (hf-bert) in hf_config, name")
    assert layout.model_difference(STORED, model | {"n_layers": 2}).endswith("in n_layers")


# ---------------------------------------------------------------- like with like (aggregate/compare/measured.py)

def changed(study: cmp.Study, facts=lambda f: f, cell: tuple | None = None, **columns) -> cmp.Study:
    """A copy of a study whose facts are `facts(copy of its facts)` and whose records (those of `cell`, a KEY
    tuple, where given) hold `columns`."""
    records = study.records.copy()
    rows = (records[list(cmp.KEY)].apply(tuple, axis=1) == cell) if cell else slice(None)
    for column, value in columns.items():
        records.loc[rows, column] = value
    return cmp.Study(records, facts(json.loads(json.dumps(study.facts))) if study.facts else None)


RO_512 = ("static", "bf16", 512, "reduce-overhead", "module")
SYNTHETIC_FACTS = {"source": "synthetic", "input_sha256": {}, "vocab_size": 271,
                   "description": "SYNTHETIC 4-class stand-in, not AG News (8,000 generated rows, 7,201 train / 799 eval)",
                   "splits": {"train": {"rows": 7201, "rows_available": 7201}, "eval": {"rows": 799, "rows_available": 799}}}


def _rows(f: dict, n: int) -> dict:
    f["splits"]["train"]["rows"] = n  # data.max_train_rows: the same corpus, fewer rows used
    return f


DATA_DIFFERENCES = {  # what changes in the study's facts -> how every verdict names it, how the headline words it
    "source": (lambda f: f | {"source": "hf"}, "data (source)", "source csv against hf"),
    "sha": (lambda f: f | {"input_sha256": {"test.csv": "0" * 64}}, "data (input sha256)",
            "input sha256 test.csv 521465c2428e… against test.csv 000000000000…"),
    "rows used": (lambda f: _rows(f, 400), "data (rows used)", "train rows used 6,840 against 400"),
    "synthetic": (lambda f: SYNTHETIC_FACTS, "data (source, input sha256, vocabulary, rows used)",
                  "this study: SYNTHETIC 4-class stand-in, not AG News (8,000 generated rows, 7,201 train / 799 "
                  "eval); the stored one: AG News test split (7,600 rows), split 6,840 train / 760 eval"),
    "unknown": (lambda f: None, "data (source, input sha256, vocabulary, rows used)",
                "this study: unknown (no facts.json); the stored one: AG News test split (7,600 rows), split 6,840 "
                "train / 760 eval"),
}


@pytest.mark.unit
@pytest.mark.parametrize("kind", DATA_DIFFERENCES)
def test_a_difference_in_the_data_makes_every_configuration_not_comparable_naming_it(stored, kind):
    edit, reason, words = DATA_DIFFERENCES[kind]
    result = cmp.compare(stored, changed(stored, edit), NAMES)
    t = result.table
    assert (t.verdict == "not comparable").all() and (t.reason == reason).all()
    assert np.allclose(t.ratio, 1.0)  # the same records: only what they measured differs
    assert result.counts() | {"shared": 0} == {"shared": 0, "reproduced": 0, "differs": 0, "inconclusive": 0,
                                               "not_comparable": len(t), "judged": 0}
    assert reproduction.headline(result) == (f"Not comparable: the two studies trained on different data ({words}), "
                                             f"so none of the {len(t)} shared configurations is judged")
    md = reproduction.markdown(result, NAMES)
    assert md.index("**Not comparable") < md.index("## What each study measured") < md.index("## Versions")
    assert "- Data: **differ** in " in md


PROTOCOL_DIFFERENCES = {  # a record column of one configuration -> how its verdict names the difference
    "timed steps": ({"timed_steps": 30}, "protocol (timed steps 50 against 30)", "timed steps"),
    "warm-up": ({"warmup_steps": 2}, "protocol (warm-up steps 5 against 2)", "warm-up steps"),
    "epoch cap": ({"max_epoch_steps": None}, "protocol (epoch cap (max_epoch_steps) 60 against none)",
                  "epoch cap (max_epoch_steps)"),
    "precision": ({"float32_matmul_precision": "high"}, "protocol (fp32 matmul precision highest against high)",
                  "fp32 matmul precision"),
    "TF32": ({"cuda_matmul_allow_tf32": True}, "protocol (TF32 matmuls False against True)", "TF32 matmuls"),
}


@pytest.mark.unit
@pytest.mark.parametrize("kind", PROTOCOL_DIFFERENCES)
def test_a_difference_in_a_configurations_protocol_makes_it_alone_not_comparable(stored, kind):
    columns, reason, setting = PROTOCOL_DIFFERENCES[kind]
    itself = cmp.compare(stored, stored, NAMES).table.set_index(cmp.KEY)
    result = cmp.compare(stored, changed(stored, cell=RO_512, **columns), NAMES)
    t = result.table.set_index(cmp.KEY)
    assert (t.loc[RO_512, "verdict"], t.loc[RO_512, "reason"]) == ("not comparable", reason)
    others = t.drop(RO_512)
    assert (others.verdict == itself.drop(RO_512).verdict).all() and others.protocol_differs.isna().all()
    c = result.counts()
    assert c["not_comparable"] == 1 and c["reproduced"] == (itself.drop(RO_512).verdict == "reproduced").sum()
    assert reproduction.headline(result).startswith(
        f"Not comparable: 1 of {len(t)} shared configurations, whose protocol differs ({setting}); of the others "
        f"{c['reproduced']} reproduced")
    assert f"**differs** in {setting} (see the table's verdicts)" in reproduction.markdown(result, NAMES)


@pytest.mark.unit
def test_allow_different_data_gives_the_verdicts_marked_but_never_across_protocols(stored):
    itself = cmp.compare(stored, stored, NAMES)
    other = changed(stored, DATA_DIFFERENCES["rows used"][0])
    result = cmp.compare(stored, other, NAMES, allow_different_data=True)
    assert (result.table.verdict == itself.table.verdict).all() and result.table.different_data_allowed.all()
    c = itself.counts()
    assert reproduction.headline(result) == (
        "Different data, verdicts given anyway (allow_different_data): train rows used 6,840 against 400; "
        f"{c['reproduced']} of {c['shared']} shared configurations reproduced, {c['differs']} differ, "
        f"{c['inconclusive']} inconclusive")
    md = reproduction.markdown(result, NAMES)
    assert "**differ** in train rows used (verdicts given anyway: allow_different_data)." in md
    assert md.count(" (on different data: allow_different_data) |") == len(result.table)
    both = cmp.compare(stored, changed(other, cell=RO_512, timed_steps=30), NAMES, allow_different_data=True)
    t = both.table.set_index(cmp.KEY)
    assert (t.loc[RO_512, "verdict"], t.loc[RO_512, "reason"]) == ("not comparable",
                                                                     "protocol (timed steps 50 against 30)")
    assert reproduction.headline(both).startswith(
        f"Not comparable: 1 of {c['shared']} shared configurations, whose protocol differs (timed steps); "
        "different data, verdicts given anyway (allow_different_data): train rows used 6,840 against 400; of the others")


@pytest.mark.unit
def test_a_study_against_itself_with_another_commit_and_torch_still_reproduces(stored):
    itself = cmp.compare(stored, stored, NAMES)
    result = cmp.compare(stored, changed(stored, git_commit="0123456789ab" * 3, torch="2.12.0+cu130"), NAMES)
    assert (result.table.verdict == itself.table.verdict).all() and result.counts() == itself.counts()
    assert result.counts()["reproduced"] >= 3 and reproduction.headline(result) == reproduction.headline(itself)
    assert list(result.versions.index[result.versions.differs]) == ["torch", "git_commit"]
    assert "Differences: torch, commit." in reproduction.markdown(result, NAMES)


@pytest.mark.unit
def test_records_from_a_dirty_tree_differ_by_their_count_not_by_the_studies_sizes(stored):
    """The README once listed "made from a dirty tree (0 of 70 records against 0 of 24 records)" as a difference."""
    records = stored.records.assign(git_dirty=False)
    fewer = records.iloc[: len(records) // 2]
    v = cmp._versions(records, fewer)
    assert v.loc["git_dirty", "stored"] != v.loc["git_dirty", "study"] and not v.loc["git_dirty", "differs"]
    one_dirty = fewer.assign(git_dirty=[True] + [False] * (len(fewer) - 1))
    assert cmp._versions(records, one_dirty).loc["git_dirty", "differs"]
    result = cmp.compare(cmp.Study(records, stored.facts), cmp.Study(fewer, stored.facts), NAMES)
    assert "made from a dirty tree" not in reproduction.readme_block(result, NAMES)


@pytest.mark.unit
def test_the_data_facts_compared_are_each_sides_own():
    from compile_study.aggregate.compare import measured

    facts = json.loads((STORED / "facts.json").read_text())
    data = measured.data_of(facts)
    assert (data["source"], data["train_rows"], data["eval_rows"], data["vocab_size"]) == ("csv", "6,840", "760", "8,192")
    assert data["input_sha256"] == f"test.csv {KNOWN_SHA256['test.csv']}"
    assert not measured.data_table(facts, facts).differs.any() and measured.data_of(None)["source"] == measured.UNKNOWN
    assert list(measured.data_table(facts, None).differs) == [False] + [True] * len(measured.DATA)
    assert measured.data_of(SYNTHETIC_FACTS)["input_sha256"] == "none (generated)"
    assert measured.in_short(["train_rows_available", "eval_rows", "source"]) == ["rows used", "source"]


# ---------------------------------------------------------------- no silent synthetic run (core/config/data_check.py)

def gpu_config(**data) -> dict:
    from snakemake.utils import validate

    config = grid.merge(yaml.safe_load((REPO / "config.yaml").read_text()), {"device": "cuda", "data": data})
    validate(config, str(grid.SCHEMA))
    return config


@pytest.mark.unit
def test_a_study_that_would_fall_back_to_the_stand_in_under_a_real_data_yardstick_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the hub does not answer
    monkeypatch.chdir(tmp_path)  # no ../shared/data/ag_news beside this directory
    refusal = data_check.yardstick_refusal(gpu_config(), "cuda", str(STORED), "resources/data")
    assert refusal.startswith(
        "data: this study would train on the SYNTHETIC stand-in, not AG News (source auto: hub fancyzhx/ag_news: "
        "unreachable within 3 s (or offline mode set); csv: no test.csv in '../shared/data/ag_news'), while its "
        f"yardstick {cmp_default()} trained on AG News test split (7,600 rows), split 6,840 train / 760 eval: its "
        "reproduction report could only say \"not comparable\". Stopped before any job. Give it the data, then run "
        "again:\n  - put AG News' test.csv (alone, or beside train.csv) in ../shared/data/ag_news beside the clone ("
        f"{tmp_path.parent / 'shared/data/ag_news'}), or\n  - name the directory that holds it")
    assert refusal.endswith("Or run on synthetic data on purpose with data.source: synthetic (its reproduction report "
                            "then lists the difference and gives no verdicts), or without a reproduction check: "
                            "yardstick: {cuda: null}.")
    assert data_check.yardstick_refusal(gpu_config(source="synthetic"), "cuda", str(STORED), "resources/data") is None
    assert data_check.yardstick_refusal(gpu_config(), "cuda", None, "resources/data") is None  # no yardstick
    prepared = tmp_path / "resources/data"  # prepared from real text already: nothing falls back
    prepared.mkdir(parents=True)
    shutil.copy(STORED / "facts.json", prepared / "facts.json")
    assert data_check.yardstick_refusal(gpu_config(), "cuda", str(STORED), "resources/data") is None
    shutil.copy(tmp_path / "resources/data/facts.json", tmp_path / "facts.json")
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv/test.csv").write_text('"1","a title","some words"\n')  # the data in place: no refusal
    assert data_check.yardstick_refusal(gpu_config(csv_dir=str(tmp_path / "csv")), "cuda", str(STORED), "x") is None


def cmp_default() -> str:
    return str(GPU_REFERENCE.relative_to(REPO))


@pytest.mark.dag
def test_the_dry_run_of_a_gpu_study_without_its_data_stops_before_any_job_saying_how_to_give_it(tmp_path):
    from .test_workflow import job_counts, snakemake

    quick = ["--configfile", str(REPO / "config.yaml"), str(REPO / "configs/gpu-quick.yaml")]
    refused = snakemake("-n", *quick, "--config", "device=cuda", cwd=tmp_path)  # the hub offline (conftest)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    assert "data: this study would train on the SYNTHETIC stand-in, not AG News" in refused.stderr
    assert "data.source: synthetic" in refused.stderr and "train_run" not in refused.stdout
    on_purpose = snakemake("-n", *quick, "--config", "device=cuda", "data={source: synthetic}", cwd=tmp_path)
    assert on_purpose.returncode == 0 and job_counts(on_purpose.stdout)["reproduction"] == 1, on_purpose.stderr


@pytest.mark.dag
def test_the_reproduction_rule_reads_both_studies_data_and_says_not_comparable_first(tmp_path):
    from .test_workflow import snakemake

    copy = tmp_path / "synthetic"  # the stored records, as if they had trained on the stand-in
    copy_study(STORED, copy)
    (copy / "facts.json").write_text(json.dumps(SYNTHETIC_FACTS))
    res = snakemake("--cores", "1", "reproduction.md", "--config", f"yardstick={{cuda: {STORED}}}", cwd=copy)
    assert res.returncode == 0, res.stderr[-2000:]
    verdict = next(line for line in (copy / "reproduction.md").read_text().splitlines() if line.startswith("**"))
    assert verdict.startswith("**Not comparable: the two studies trained on different data (this study: SYNTHETIC")
    assert set(pd.read_csv(copy / "reproduction.csv").verdict) == {"not comparable"}
    allow = tmp_path / "allow.yaml"  # (--config would pass the value as a string)
    allow.write_text(yaml.safe_dump({"yardstick": {"cuda": str(STORED), "allow_different_data": True}}))
    res = snakemake("--cores", "1", "reproduction.md", "--forcerun", "reproduction", "--configfile",
                    str(copy / "config.yaml"), str(allow), cwd=copy)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "**Different data, verdicts given anyway (allow_different_data): " in (copy / "reproduction.md").read_text()
    assert "not comparable" not in set(pd.read_csv(copy / "reproduction.csv").verdict)
