import json
import socket
import threading
import time

import numpy as np
import pytest

from compile_study.core.dataset import ag_news_csv, data, sources, synthetic
from compile_study.core.dataset.ag_news_csv import read_ag_news_csv
from compile_study.core.dataset.corpus import DataError
from compile_study.core.dataset.sources import load_corpus
from compile_study.core.dataset.splits import split_indices

from .conftest import AG_NEWS_DIR, data_cfg

pytestmark = pytest.mark.unit


def write(tmp_path, text: str | bytes, name="test.csv"):
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def test_csv_parser_reads_ag_news_layout(tmp_path):
    p = write(tmp_path, '"3","Oil up","Prices rose\\again."\n"1","Talks","Peace, at last"\n')
    texts, labels = read_ag_news_csv(p)
    assert texts == ["Oil up Prices rose again.", "Talks Peace, at last"]
    assert labels == [2, 0]  # 1-based class index -> 0-based label


@pytest.mark.parametrize(
    "content, message",
    [
        ('"1","only two"\n', "line 1: expected 3 fields"),
        ('"1","a","b"\n"5","c","d"\n', "line 2: class index '5'"),
        (b'"1","caf\xe9","x"\n', "not valid UTF-8"),
        ("", "file is empty"),
    ],
)
def test_csv_parser_names_file_and_problem(tmp_path, content, message):
    p = write(tmp_path, content)
    with pytest.raises(DataError, match=message) as err:
        read_ag_news_csv(p)
    assert str(p) in str(err.value)


def test_split_is_deterministic_stratified_and_disjoint():
    labels = [i % 4 for i in range(400)]
    tr1, ev1 = split_indices(labels, 0.1, seed=3)
    tr2, ev2 = split_indices(labels, 0.1, seed=3)
    assert np.array_equal(tr1, tr2) and np.array_equal(ev1, ev2)
    assert not set(tr1) & set(ev1) and len(tr1) + len(ev1) == 400
    assert np.bincount(np.asarray(labels)[ev1]).tolist() == [10, 10, 10, 10]


def test_synthetic_is_labelled_as_such_and_news_like():
    c = synthetic.make_synthetic(2000, 0.1, seed=0)
    assert c.source == "synthetic" and "not AG News" in c.description
    words = np.array([len(t.split()) for t in c.train_texts])
    assert 30 <= np.median(words) <= 45 and np.percentile(words, 99) > 70
    assert set(c.train_labels) == {0, 1, 2, 3}


def test_auto_falls_over_quickly_to_csv_then_synthetic(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    write(tmp_path, "".join(f'"{1 + i % 4}","title {i}","words {i}"\n' for i in range(40)))
    t0 = time.perf_counter()
    c = load_corpus(data_cfg(source="auto", csv_dir=str(tmp_path), verify_sha256=False), tmp_path / "hf")
    assert c.source == "csv" and any("skipped hub" in n for n in c.notes)
    assert "only test.csv present" in c.notes[-1]
    c = load_corpus(data_cfg(source="auto", csv_dir=str(tmp_path / "missing")), tmp_path / "hf")
    assert c.source == "synthetic" and any("no test.csv" in n for n in c.notes)
    assert time.perf_counter() - t0 < 10


def test_hub_check_honours_offline_mode(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    assert sources.hub_reachable(timeout_s=30) is False
    assert time.perf_counter() - t0 < 1


@pytest.fixture
def resolver_that_never_answers(monkeypatch):
    """socket.getaddrinfo blocked until the test ends, as a resolver that never answers (no network needed)."""
    release, asked = threading.Event(), []

    def blocked(host, *args, **kwargs):
        asked.append(host)
        release.wait()
        raise OSError("released")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(socket, "getaddrinfo", blocked)
    yield asked
    release.set()


def test_the_hub_checks_limit_covers_name_resolution(resolver_that_never_answers):
    t0 = time.perf_counter()
    assert sources.hub_reachable(timeout_s=0.5) is False
    wall = time.perf_counter() - t0
    assert resolver_that_never_answers == ["huggingface.co"] and 0.5 <= wall < 1.5, wall
    t0 = time.perf_counter()  # the dry run's question (data_check): would source auto fall back to the stand-in?
    cfg = data_cfg(source="auto", csv_dir=None, hf_timeout_s=0.5)
    assert sources.synthetic_fallback(cfg) == ["hub fancyzhx/ag_news: unreachable within 0.5 s (or offline mode set)",
                                               "csv: no test.csv in None"]
    assert time.perf_counter() - t0 < 1.5


def test_the_hub_check_connects_within_what_is_left_of_its_limit(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    seen = []
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "",
                                                                   ("192.0.2.1", 443))])

    def connect(address, timeout):
        seen.append((address, timeout))
        raise OSError("unreachable")

    monkeypatch.setattr(socket, "create_connection", connect)
    assert sources.hub_reachable(timeout_s=2.0) is False
    ((address, timeout),) = seen
    assert address == ("192.0.2.1", 443) and 1.5 < timeout <= 2.0


@pytest.mark.skipif(not (AG_NEWS_DIR / "test.csv").is_file(), reason="shared AG News test split not present")
def test_real_ag_news_test_split_is_recognised(tmp_path):
    c = ag_news_csv.load_csv(AG_NEWS_DIR, 0.1, seed=0)
    assert c.description.startswith("AG News test split (7,600 rows)")
    assert c.input_sha256["test.csv"] == ag_news_csv.KNOWN_SHA256["test.csv"]
    assert len(c.train_texts) == 6840 and len(c.eval_texts) == 760


def test_tokenizer_round_trip():
    texts = ["Stocks rally as oil prices fall", "The team won the cup final"] * 50
    tok = data.train_tokenizer(texts, vocab_size=200)
    enc = tok.encode("Stocks rally as the team won")
    assert tok.decode(enc.ids) == "stocks rally as the team won"
    assert tok.token_to_id("[PAD]") == 0 and tok.token_to_id("[UNK]") == 1


def test_prepare_writes_ids_lengths_labels_and_facts(synthetic_data):
    import json

    from compile_study.core.dataset.data import load_split

    facts = json.loads((synthetic_data / "facts.json").read_text())
    ids, lengths, labels = load_split(synthetic_data, "train")
    assert ids.shape == (facts["splits"]["train"]["rows"], facts["max_len"])
    assert (lengths == (ids != 0).sum(1)).all()  # true lengths match the non-pad tokens
    assert set(np.unique(labels)) <= {0, 1, 2, 3}
    assert facts["source"] == "synthetic" and facts["splits"]["eval"]["rows"] == 40
    assert 0 < facts["splits"]["train"]["pad_fraction_at_max_len"] < 1


def test_a_capped_train_split_says_how_many_rows_it_had_and_how_many_the_runs_use(tmp_path):
    from compile_study.core.dataset.data import prepare, steps_per_epoch

    from .conftest import TINY_MODEL, data_cfg

    facts = prepare(data_cfg(max_train_rows=100), TINY_MODEL["max_len"], tmp_path, tmp_path / "hf")
    train = facts["splits"]["train"]
    assert (train["rows"], train["rows_available"]) == (100, 360)  # 400 synthetic rows, 10% to eval
    assert facts["splits"]["eval"]["rows"] == facts["splits"]["eval"]["rows_available"] == 40
    assert any("capped at the first 100 rows" in note for note in facts["notes"])
    assert steps_per_epoch(32, train["rows"]) == 3  # epochs are epochs of the rows used


def test_a_local_path_is_shown_without_the_machine_it_lives_on(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert ag_news_csv.display_path("../shared/data/ag_news") == "../shared/data/ag_news"  # as configured
    assert ag_news_csv.display_path(tmp_path / "csv" / "ag") == "csv/ag"  # inside the study directory
    assert ag_news_csv.display_path("/somewhere/else/ag_news") == "ag_news"  # elsewhere: the directory's name


def test_facts_name_the_csv_directory_by_its_display_form(tmp_path, monkeypatch):
    study, elsewhere = tmp_path / "study", tmp_path / "elsewhere" / "ag_csv"
    study.mkdir()
    elsewhere.mkdir(parents=True)
    write(elsewhere, "".join(f'"{1 + i % 4}","title {i}","words {i}"\n' for i in range(40)))
    monkeypatch.chdir(study)
    c = ag_news_csv.load_csv(elsewhere, 0.1, seed=0, verify_sha256=False)
    assert c.csv_dir == "ag_csv" and c.notes[0].startswith("read from ag_csv: only test.csv present")
    assert str(tmp_path) not in " ".join(c.notes + [c.description])


def test_empty_split_is_refused_before_tokenizing():
    with pytest.raises(DataError, match=r"data.eval_fraction 0.01 leaves the eval split empty: of the 40 rows of the "
                                        r"synthetic corpus \(World \d+, Sports \d+, Business \d+, Sci/Tech \d+\)"):
        synthetic.make_synthetic(40, 0.01, seed=0)
    with pytest.raises(DataError, match="leaves the train split empty: .* use data.eval_fraction below 0.9"):
        split_indices([0] * 5 + [1] * 5, 0.96, seed=0)
    tr, ev = split_indices([0] * 5 + [1] * 5, 0.2, seed=0)
    assert len(tr) == 8 and len(ev) == 2


def test_split_labels_are_the_labels_that_get_split(tmp_path):
    cfg = data_cfg(synthetic_rows=400)
    labels, what = sources.split_labels(cfg)
    c = synthetic.make_synthetic(400, 0.1, seed=0)
    assert sorted(labels) == sorted(c.train_labels + c.eval_labels) and what == synthetic.SYNTHETIC
    write(tmp_path, '"3","a","b"\n"1","c","d"\n')
    assert sources.split_labels(data_cfg(source="csv", csv_dir=str(tmp_path)))[0] == [2, 0]
    assert sources.split_labels(data_cfg(source="auto", csv_dir=str(tmp_path))) is None  # the hub may answer
    write(tmp_path, '"3","a","b"\n', name="train.csv")
    assert sources.split_labels(data_cfg(source="csv", csv_dir=str(tmp_path))) is None  # eval = test.csv, no split


def test_a_single_class_and_heavy_truncation_are_warned_in_the_log_and_the_facts(tmp_path, capsys):
    write(tmp_path, "".join(f'"2","Cup final {i}","the team won the cup final again {i}"\n' for i in range(40)))
    cfg = data_cfg(source="csv", csv_dir=str(tmp_path), verify_sha256=False, vocab_size=100)
    facts = data.prepare(cfg, 4, tmp_path / "out", tmp_path / "hf")
    assert facts["splits"]["train"]["truncated_fraction"] == 1.0
    assert facts["warnings"] == [
        "the train split holds a single class (Sports, 36 rows): its accuracy says nothing about the classifier",
        "the eval split holds a single class (Sports, 4 rows): its accuracy says nothing about the classifier",
        f"model.max_len 4 truncates 100% of the train rows (median length "
        f"{facts['splits']['train']['token_length_percentiles']['p50']:.0f} tokens): the runs time sequences cut short",
    ]
    assert capsys.readouterr().err.count("warning: ") == 3
    assert json.loads((tmp_path / "out" / "facts.json").read_text())["warnings"] == facts["warnings"]


def test_news_length_data_at_the_studied_max_len_has_no_warnings(tmp_path):
    facts = data.prepare(data_cfg(), 128, tmp_path, tmp_path / "hf")  # the studied model.max_len
    assert facts["splits"]["train"]["truncated_fraction"] < 0.05
    assert facts["warnings"] == [] and facts["csv_dir"] is None
