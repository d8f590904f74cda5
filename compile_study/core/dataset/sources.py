"""Where a study's corpus comes from: the choice among the Hugging Face hub, AG News' CSV files
(core/dataset/ag_news_csv.py) and the labelled synthetic stand-in (core/dataset/synthetic.py), with source auto's fallbacks
and why it took them; the hub itself (reachability, loading).

    python -c "from compile_study.core.dataset.sources import load_corpus; print(load_corpus(cfg, 'resources/hf_cache').description)"
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

from compile_study.core.dataset.ag_news_csv import csv_files, display_path, load_csv, read_ag_news_csv
from compile_study.core.dataset.corpus import CLASSES, Corpus, DataError
from compile_study.core.dataset.synthetic import SYNTHETIC, make_synthetic, synthetic_labels


def hub_reachable(host: str = "huggingface.co", timeout_s: float = 3.0) -> bool:
    """A TCP connect to the hub within timeout_s, name resolution included (`datasets` itself retries for ~25 s
    offline, and a resolver that never answers blocks getaddrinfo for as long as it likes: it is asked in a
    thread of its own, left behind if it does not answer in time)."""
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        return False
    deadline = time.monotonic() + timeout_s
    found: list = []
    resolver = threading.Thread(target=_resolve, args=(host, found), daemon=True, name="hub-dns")
    resolver.start()
    resolver.join(timeout_s)
    for *_, address in found[0] if found else []:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            with socket.create_connection(address[:2], timeout=left):
                return True
        except OSError:
            continue
    return False


def _resolve(host: str, found: list) -> None:
    try:
        found.append(socket.getaddrinfo(host, 443, type=socket.SOCK_STREAM))
    except OSError:
        found.append([])


def load_hf(name: str, cache_dir: str | os.PathLike) -> Corpus:
    """AG News from the Hugging Face hub (`text`, `label` 0-3; train 120,000 / test 7,600); a dataset that is not
    AG News' four classes is refused (check_ag_news)."""
    import datasets  # imported here: only the hub source needs it

    ds = datasets.load_dataset(name, cache_dir=str(cache_dir))
    check_ag_news(name, ds)
    train, test = ds["train"], ds["test"]
    return Corpus(
        train_texts=list(train["text"]),
        train_labels=[int(x) for x in train["label"]],
        eval_texts=list(test["text"]),
        eval_labels=[int(x) for x in test["label"]],
        source="hf",
        description=f"AG News (hub dataset {name}: {len(train):,} train / {len(test):,} test rows)",
        notes=[f"loaded from the Hugging Face hub ({name}); eval = the official test split"],
        input_sha256={},
    )


def check_ag_news(name: str, ds) -> None:
    """A hub dataset the study may call AG News: train and test splits with `text` and `label`, the label's names
    AG News' four classes in their order (or, unnamed, its values 0, 1, 2 and 3); else a DataError before any run."""
    where = f"data.hf_name {name!r}"
    missing = [s for s in ("train", "test") if s not in ds]
    if missing:
        raise DataError(f"{where}: no {' or '.join(missing)} split (it has {', '.join(ds)}); the study needs "
                        "AG News' train and test splits")
    absent = [c for c in ("text", "label") if c not in ds["train"].column_names]
    if absent:
        raise DataError(f"{where}: no column {' or '.join(absent)} (it has {', '.join(ds['train'].column_names)}); "
                        "the study needs AG News' text and label")
    names = getattr(ds["train"].features["label"], "names", None)
    if names is not None:
        found = f"its {len(names)} classes are {', '.join(map(str, names))}"
        agrees = [str(n).lower() for n in names] == [c.lower() for c in CLASSES]
    else:
        values = sorted({int(v) for split in ("train", "test") for v in ds[split]["label"]})
        found, agrees = f"its labels are {values}", values == list(range(len(CLASSES)))
    if not agrees:
        raise DataError(f"{where}: {found}, not AG News' {len(CLASSES)} classes ({', '.join(CLASSES)}); the study "
                        "trains and reports on AG News: name an AG News dataset (default fancyzhx/ag_news)")


def split_labels(data_cfg: dict) -> tuple[list[int], str] | None:
    """The labels the configured source would split by data.eval_fraction and what they are, found without
    tokenizing (test.csv alone in csv_dir, or the synthetic corpus); None where the split is given (the hub's,
    train.csv + test.csv) or the source is `auto` (the hub may answer)."""
    if data_cfg["source"] == "synthetic":
        return synthetic_labels(data_cfg["synthetic_rows"], data_cfg["seed"]), SYNTHETIC
    csv_dir = Path(data_cfg.get("csv_dir") or "")
    if data_cfg["source"] == "csv" and list(csv_files(csv_dir)) == ["test.csv"]:
        return read_ag_news_csv(csv_dir / "test.csv")[1], f"{display_path(csv_dir)}/test.csv"
    return None


def load_corpus(data_cfg: dict, cache_dir: str | os.PathLike) -> Corpus:
    """Dispatch on `data.source`; `auto` tries hub -> CSV directory -> synthetic and says why."""
    source, seed, frac = data_cfg["source"], data_cfg["seed"], data_cfg["eval_fraction"]
    if source == "hf":
        return load_hf(data_cfg["hf_name"], cache_dir)
    verify = data_cfg.get("verify_sha256", True)
    if source == "csv":
        return load_csv(data_cfg["csv_dir"], frac, seed, verify)
    if source == "synthetic":
        return make_synthetic(data_cfg["synthetic_rows"], frac, seed)
    tried = []
    if hub_reachable(timeout_s=data_cfg["hf_timeout_s"]):
        try:
            return _with_notes(load_hf(data_cfg["hf_name"], cache_dir), tried)
        except DataError:  # the hub answered with data that is not AG News: no reason to fall over
            raise
        except Exception as e:  # any hub failure falls over to the next source, with the reason kept
            tried.append(f"hub {data_cfg['hf_name']}: {type(e).__name__}: {str(e)[:200]}")
    else:
        tried.append(_hub_unreachable(data_cfg))
    csv_dir = data_cfg.get("csv_dir")
    if _has_test_csv(csv_dir):  # a broken file there is an error, not a reason to fall over
        return _with_notes(load_csv(csv_dir, frac, seed, verify), tried)
    tried.append(_no_test_csv(csv_dir))
    return _with_notes(make_synthetic(data_cfg["synthetic_rows"], frac, seed), tried)


def _hub_unreachable(data_cfg: dict) -> str:
    return f"hub {data_cfg['hf_name']}: unreachable within {data_cfg['hf_timeout_s']} s (or offline mode set)"


def _has_test_csv(csv_dir: str | None) -> bool:
    return bool(csv_dir) and "test.csv" in csv_files(csv_dir)


def _no_test_csv(csv_dir: str | None) -> str:
    return f"csv: no test.csv in {display_path(csv_dir) if csv_dir else None!r}"


def synthetic_fallback(data_cfg: dict) -> list[str]:
    """Why source auto would train on the synthetic stand-in, as load_corpus would note it ([] where it would
    find real text: a csv_dir holding test.csv, or a hub that answers; any other source: [])."""
    if data_cfg["source"] != "auto":
        return []
    try:
        if _has_test_csv(data_cfg.get("csv_dir")):
            return []
    except DataError:  # a broken file there: load_corpus stops on it (config_check.data_warnings names it)
        return []
    if hub_reachable(timeout_s=data_cfg["hf_timeout_s"]):
        return []
    return [_hub_unreachable(data_cfg), _no_test_csv(data_cfg.get("csv_dir"))]


def is_real_data(facts: dict | None) -> bool:
    """Whether a study's data facts (facts.json) say it trained on real text (the hub's or a CSV's)."""
    return facts is not None and facts.get("source") in ("hf", "csv")


def _with_notes(corpus: Corpus, tried: list[str]) -> Corpus:
    corpus.notes = [f"source auto: skipped {t}" for t in tried] + corpus.notes
    return corpus
