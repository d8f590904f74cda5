"""Data preparation: a corpus (sources.py: hub, local CSV or a labelled synthetic stand-in) -> tokenizer -> ids.

Run once per study by the `prepare_data` rule; every training run reads its outputs:

    python -c "from compile_study.core.dataset.data import prepare; prepare(cfg, 'resources/data')"
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

from compile_study.core.dataset.corpus import CLASSES
from compile_study.core.dataset.sources import load_corpus
from compile_study.core.io import DISK_FULL, _atomic, write_json_atomic, write_npy_atomic

# ---------------------------------------------------------------- tokenizer + encoding

SPECIAL_TOKENS = ("[PAD]", "[UNK]")  # id 0 = padding (model.PAD_ID), id 1 = unknown


def train_tokenizer(texts: list[str], vocab_size: int):
    """A WordPiece tokenizer (lower-cased, accents stripped) trained on the train split only."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def encode(tok, texts: list[str], max_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """-> ids [N, max_len] int32 (0-padded, truncated), lengths [N] after truncation, full lengths [N]."""
    encs = tok.encode_batch(texts)
    full = np.array([len(e.ids) for e in encs], dtype=np.int32)
    ids = np.zeros((len(texts), max_len), dtype=np.int32)
    for i, e in enumerate(encs):
        row = e.ids[:max_len] or [SPECIAL_TOKENS.index("[UNK]")]  # never an all-pad row
        ids[i, : len(row)] = row
    lengths = np.minimum(np.maximum(full, 1), max_len).astype(np.int32)
    return ids, lengths, full


def prepare(data_cfg: dict, max_len: int, out_dir: str | os.PathLike, cache_dir: str | os.PathLike) -> dict:
    """Load, tokenize and write `{split}_ids.npy`, `{split}_lengths.npy`, `{split}_labels.npy`,
    `tokenizer.json` and `facts.json` into out_dir; returns the facts."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    corpus = load_corpus(data_cfg, cache_dir)
    available = {"train": len(corpus.train_texts), "eval": len(corpus.eval_texts)}
    if data_cfg.get("max_train_rows"):
        n = data_cfg["max_train_rows"]
        corpus.train_texts, corpus.train_labels = corpus.train_texts[:n], corpus.train_labels[:n]
        corpus.notes.append(f"train split capped at the first {n:,} rows (data.max_train_rows)")
    tok = train_tokenizer(corpus.train_texts, data_cfg["vocab_size"])
    save_tokenizer(tok, out / "tokenizer.json")
    facts = {
        "source": corpus.source,
        "description": corpus.description,
        "corpus_rows": sum(available.values()),  # rows the source gave, before data.max_train_rows
        "notes": corpus.notes,
        "input_sha256": corpus.input_sha256,
        "csv_dir": corpus.csv_dir,
        "classes": list(CLASSES),
        "vocab_size": tok.get_vocab_size(),
        "max_len": max_len,
        "splits": {},
    }
    for split, texts, labels in (
        ("train", corpus.train_texts, corpus.train_labels),
        ("eval", corpus.eval_texts, corpus.eval_labels),
    ):
        ids, lengths, full = encode(tok, texts, max_len)
        write_npy_atomic(out / f"{split}_ids.npy", ids)
        write_npy_atomic(out / f"{split}_lengths.npy", lengths)
        write_npy_atomic(out / f"{split}_labels.npy", np.asarray(labels, dtype=np.int64))
        facts["splits"][split] = {
            "rows": len(texts),  # the rows the runs use: epochs and break-even are counted in them
            "rows_available": available[split],  # before data.max_train_rows
            "class_counts": {CLASSES[c]: int(n) for c, n in zip(*np.unique(labels, return_counts=True))},
            "token_length_percentiles": {f"p{q}": float(np.percentile(full, q)) for q in (50, 90, 99)}
            | {"max": int(full.max())},
            "truncated_fraction": float((full > max_len).mean()),
            "pad_fraction_at_max_len": float(1 - lengths.sum() / (len(texts) * max_len)),
        }
    facts["warnings"] = data_warnings(facts)
    for w in facts["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    write_json_atomic(out / "facts.json", facts)
    return facts


def save_tokenizer(tok, path: Path) -> None:
    """Written atomically; tokenizers reports a full disk as a plain Exception, made an OSError here so that it
    ends in io's one line (the path and the free space)."""

    def write(tmp: Path) -> None:
        try:
            tok.save(str(tmp))
        except Exception as e:
            full = [n for n in DISK_FULL if f"os error {n})" in str(e)]
            if full:
                raise OSError(full[0], str(e)) from None
            raise

    _atomic(path, write)


TRUNCATION_WARNING = 0.5  # share of train rows cut at max_len past which the study no longer times news-length text


def data_warnings(facts: dict) -> list[str]:
    """Data the study can run on but whose results mislead, one sentence each (for the log and the paper)."""
    out = []
    for split, s in facts["splits"].items():
        if len(s["class_counts"]) == 1:
            (name, n), = s["class_counts"].items()
            out.append(f"the {split} split holds a single class ({name}, {n:,} rows): its accuracy says nothing "
                       "about the classifier")
    train = facts["splits"]["train"]
    if train["truncated_fraction"] > TRUNCATION_WARNING:
        out.append(f"model.max_len {facts['max_len']} truncates {train['truncated_fraction']:.0%} of the train rows "
                   f"(median length {train['token_length_percentiles']['p50']:.0f} tokens): the runs time "
                   "sequences cut short")
    return out


def read_facts(path: str | os.PathLike) -> dict | None:
    """A study's data facts (facts.json, as `prepare` wrote them), or None where there are none."""
    path = Path(path)
    return json.loads(path.read_text()) if path.is_file() else None


def steps_per_epoch(batch_size: int, train_rows: int) -> int:
    """Steps in one epoch of `train_rows` rows (facts.json's splits.train.rows) at a batch size; the last
    partial batch is dropped, as the training loop does."""
    return int(train_rows) // int(batch_size)


def load_split(data_dir: str | os.PathLike, split: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """-> ids [N, max_len], lengths [N], labels [N] as written by `prepare`."""
    d = Path(data_dir)
    return tuple(np.load(d / f"{split}_{part}.npy") for part in ("ids", "lengths", "labels"))
