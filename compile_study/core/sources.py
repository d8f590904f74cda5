"""Where a study's corpus comes from: the Hugging Face hub, AG News' CSV files, or a labelled synthetic
stand-in; the train/eval split and the checks that make bad data fail with a message naming file and line.

    python -c "from compile_study.core.sources import load_corpus; print(load_corpus(cfg, 'resources/hf_cache').description)"
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import socket
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CLASSES = ("World", "Sports", "Business", "Sci/Tech")
SPECIAL_TOKENS = ("[PAD]", "[UNK]")  # id 0 = padding (model.PAD_ID), id 1 = unknown
# sha256 of the original AG News CSV files (checked, and named in the facts when they match)
KNOWN_SHA256 = {
    "train.csv": "76a0a2d2f92b286371fe4d4044640910a04a803fdd2538e0f3f29a5c6f6b672e",
    "test.csv": "521465c2428ed7f02f8d6db6ffdd4b5447c1c701962353eb2c40d548c3c85699",
}


# what load_csv reads; train.csv without test.csv is refused (the study evaluates on test.csv)
CSV_LAYOUT = "AG News CSV layout: test.csv, either beside train.csv or alone (then split by data.eval_fraction)"


class DataError(ValueError):
    """Bad or missing input data; the message names the file and what is wrong."""


@dataclass
class Corpus:
    """Raw texts and 0-based labels for the train and eval splits, plus provenance."""

    train_texts: list[str]
    train_labels: list[int]
    eval_texts: list[str]
    eval_labels: list[int]
    source: str  # hf | csv | synthetic
    description: str  # what the paper calls the data, e.g. "AG News test split (7,600 rows)"
    notes: list[str]
    input_sha256: dict[str, str]
    csv_dir: str | None = None  # as the paper may show it (display_path), when read from CSV


# ---------------------------------------------------------------- sources


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
    """AG News from the Hugging Face hub (`text`, `label` 0-3; train 120,000 / test 7,600)."""
    import datasets  # imported here: only the hub source needs it

    ds = datasets.load_dataset(name, cache_dir=str(cache_dir))
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


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_ag_news_csv(path: str | os.PathLike) -> tuple[list[str], list[int]]:
    """Parse AG News' original CSV: no header, fields class index (1-4), title, description.

    Returns texts (title + " " + description, as the hub's `text` column) and 0-based labels.
    Any malformed row is an error naming the file and line: nothing is skipped silently.
    """
    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataError(f"{path}: line {line}: not valid UTF-8 (byte {raw[e.start]:#04x} at offset {e.start})") from None
    text = text.removeprefix("\ufeff")  # a byte-order mark, as spreadsheet programs write
    texts, labels = [], []
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        for row in reader:
            lineno = reader.line_num
            if len(row) != 3:
                raise DataError(f"{path}: line {lineno}: expected 3 fields (class index, title, description), "
                                f"got {len(row)}{_header_hint(row, lineno)}")
            if row[0] not in ("1", "2", "3", "4"):
                raise DataError(f"{path}: line {lineno}: class index {row[0]!r} is not one of 1, 2, 3, 4"
                                + _header_hint(row, lineno))
            # AG News escapes newlines inside fields as a literal backslash
            texts.append(f"{row[1]} {row[2]}".replace("\\", " ").strip())
            labels.append(int(row[0]) - 1)
    except csv.Error as e:
        if "field larger than field limit" in str(e):  # the reader's limit (131,072 characters), not truncation
            raise DataError(f"{path}: line {reader.line_num}: a field longer than {csv.field_size_limit():,} "
                            "characters, the CSV reader's limit (AG News' fields are a title and a short "
                            "description): is this file in AG News' CSV layout?") from None
        raise DataError(f"{path}: line {reader.line_num}: malformed CSV ({e}); is the file truncated?") from None
    if not texts:
        raise DataError(f"{path}: file is empty")
    return texts, labels


def file_problem(path: str | os.PathLike) -> str | None:
    """Why `path`, which exists under that name, cannot be read as a data file (None: a readable regular file,
    or nothing there). A dangling link, a directory or a device is named, never taken for a missing file."""
    path = Path(path)
    if not os.path.lexists(path):
        return None
    if path.is_symlink() and not path.exists():
        return f"{path} is a symbolic link to {os.readlink(path)!r}, which does not exist"
    try:
        mode = path.stat().st_mode
    except OSError as e:
        return f"{path} cannot be read ({e.strerror})"
    if not stat.S_ISREG(mode):
        kinds = {stat.S_ISDIR: "a directory", stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device",
                 stat.S_ISFIFO: "a named pipe", stat.S_ISSOCK: "a socket"}
        kind = next((k for test, k in kinds.items() if test(mode)), "not a regular file")
        return f"{path} is {kind}, not a regular file"
    if not os.access(path, os.R_OK):
        return f"{path} is not readable (permissions {stat.filemode(mode)})"
    return None


def csv_files(csv_dir: str | os.PathLike) -> dict[str, Path]:
    """train.csv and test.csv where they are (absent ones left out); a name that is there but cannot be read
    (file_problem) is a DataError, so that a broken train.csv is never passed over for a split of test.csv."""
    found = {}
    for name in ("train.csv", "test.csv"):
        path = Path(csv_dir) / name
        why = file_problem(path)
        if why:
            raise DataError(f"{why}; {CSV_LAYOUT}")
        if path.is_file():
            found[name] = path
    return found


def _header_hint(row: list[str], lineno: int) -> str:
    if lineno == 1 and row and not row[0].strip().isdigit():
        fields = ", ".join(map(repr, row[:3]))
        return f"; it looks like a header row ({fields}), and AG News' CSV has none: delete that line"
    return ""


def _n_eval(n_rows: int, eval_fraction: float) -> int:
    return int(round(n_rows * eval_fraction))


def check_split(labels: list[int], what: str, eval_fraction: float) -> None:
    """Refuse an eval_fraction that leaves the train or the eval split of `what` (the rows' source) empty,
    naming the per-class counts."""
    counts = dict(zip(*np.unique(np.asarray(labels, dtype=np.int64), return_counts=True)))
    n_eval = sum(_n_eval(n, eval_fraction) for n in counts.values())
    if 0 < n_eval < len(labels):
        return
    per_class = ", ".join(f"{CLASSES[c]} {n:,}" for c, n in counts.items())
    half_row = 0.5 / max(counts.values())  # round() needs more than half a row in the largest class
    if n_eval == 0:
        side, outcome, fix = "eval", "no class gives eval a row", f"use data.eval_fraction above {half_row:.3g}"
    else:
        side, outcome = "train", "every class gives eval all its rows"
        fix = f"use data.eval_fraction below {1 - half_row:.3g}"
    if len(labels) < 2:
        fix = "one row cannot be split"
    raise DataError(f"data.eval_fraction {eval_fraction} leaves the {side} split empty: of the {len(labels):,} rows "
                    f"of {what} ({per_class}), {outcome} (round(class rows x {eval_fraction})); {fix}, or more rows")


def split_rows(labels: list[int], eval_fraction: float) -> tuple[int, int]:
    """(train rows, eval rows) of the stratified split of `labels` (split_indices), without drawing it."""
    counts = np.unique(np.asarray(labels, dtype=np.int64), return_counts=True)[1]
    n_eval = sum(_n_eval(int(n), eval_fraction) for n in counts)
    return len(labels) - n_eval, n_eval


def split_indices(labels: list[int], eval_fraction: float, seed: int, what: str = "the data"
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic stratified split: the same eval_fraction of every class goes to eval (`what` names the rows)."""
    check_split(labels, what, eval_fraction)
    rng = np.random.default_rng(seed)
    labels_arr = np.asarray(labels)
    train_idx, eval_idx = [], []
    for c in np.unique(labels_arr):
        idx = rng.permutation(np.flatnonzero(labels_arr == c))
        n_eval = _n_eval(len(idx), eval_fraction)
        eval_idx.append(idx[:n_eval])
        train_idx.append(idx[n_eval:])
    return np.sort(np.concatenate(train_idx)), np.sort(np.concatenate(eval_idx))


def csv_sha256(files: dict[str, Path], verify_sha256: bool = True) -> dict[str, str]:
    """name -> sha256 of each file (csv_files); with verify_sha256 one that is not AG News' is a DataError."""
    sha = {name: sha256_file(path) for name, path in files.items()}
    for name, digest in sha.items():
        if verify_sha256 and digest != KNOWN_SHA256[name]:
            raise DataError(
                f"{files[name]}: sha256 {digest[:16]}… does not match AG News' {name} "
                f"({KNOWN_SHA256[name][:16]}…); a modified or truncated copy? "
                "Set data.verify_sha256: false to use it anyway"
            )
    return sha


def load_csv(csv_dir: str | os.PathLike, eval_fraction: float, seed: int, verify_sha256: bool = True) -> Corpus:
    """AG News from a directory in the original layout (train.csv and test.csv, or test.csv alone).

    With verify_sha256 (the default) a train.csv or test.csv that is not byte-identical to AG News'
    is an error; without it such a file is used and labelled as an unrecognised copy.
    """
    csv_dir = Path(csv_dir)
    test_path, train_path = csv_dir / "test.csv", csv_dir / "train.csv"
    files = csv_files(csv_dir)
    if "test.csv" not in files:
        has_train = " (train.csv alone is not enough: eval is test.csv or a split of it)" if files else ""
        raise DataError(f"{csv_dir}: no test.csv{has_train}; {CSV_LAYOUT}")
    sha = csv_sha256(files, verify_sha256)
    known = all(KNOWN_SHA256.get(name) == digest for name, digest in sha.items())
    test_texts, test_labels = read_ag_news_csv(test_path)
    name = "AG News" if known else "AG-News-format CSV (unrecognised sha256)"
    if "train.csv" in files:
        train_texts, train_labels = read_ag_news_csv(train_path)
        desc = f"{name} ({len(train_texts):,} train / {len(test_texts):,} test rows, local CSV)"
        notes = [f"read from {display_path(csv_dir)}; eval = test.csv"]
        return Corpus(train_texts, train_labels, test_texts, test_labels, "csv", desc, notes, sha, display_path(csv_dir))
    tr, ev = split_indices(test_labels, eval_fraction, seed, f"{display_path(csv_dir)}/test.csv")
    desc = (
        f"{name} test split ({len(test_texts):,} rows), split {len(tr):,} train / {len(ev):,} eval"
        if known
        else f"{name} ({len(test_texts):,} rows), split {len(tr):,} train / {len(ev):,} eval"
    )
    notes = [
        f"read from {display_path(csv_dir)}: only test.csv present, so it was split deterministically "
        f"(stratified by class, seed {seed}) into {1 - eval_fraction:.0%} train / {eval_fraction:.0%} eval"
    ]
    pick = lambda xs, idx: [xs[i] for i in idx]  # noqa: E731
    return Corpus(pick(test_texts, tr), pick(test_labels, tr), pick(test_texts, ev), pick(test_labels, ev), "csv", desc,
                  notes, sha, display_path(csv_dir))


def display_path(path: str | os.PathLike) -> str:
    """A local path as the paper may show it: relative as configured, else relative to the study directory,
    else the directory's name alone (an absolute path would only name the author's machine)."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    try:
        return p.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return p.name


def split_labels(data_cfg: dict) -> tuple[list[int], str] | None:
    """The labels the configured source would split by data.eval_fraction and what they are, found without
    tokenizing (test.csv alone in csv_dir, or the synthetic corpus); None where the split is given (the hub's,
    train.csv + test.csv) or the source is `auto` (the hub may answer)."""
    if data_cfg["source"] == "synthetic":
        return _synthetic_draw(data_cfg["synthetic_rows"], data_cfg["seed"])[1], SYNTHETIC
    csv_dir = Path(data_cfg.get("csv_dir") or "")
    if data_cfg["source"] == "csv" and list(csv_files(csv_dir)) == ["test.csv"]:
        return read_ag_news_csv(csv_dir / "test.csv")[1], f"{display_path(csv_dir)}/test.csv"
    return None


# Per-class topic words; the shared filler makes classes separable but not trivially so.
_SYNTH_TOPICS = (
    "minister election government troops peace talks united nations capital president border protest",
    "team season coach league match goal championship player score victory cup final",
    "shares profit market stocks company quarterly investors oil prices economy bank deal",
    "software internet computer space nasa research microsoft online technology scientists chip web",
)
SYNTHETIC = "the synthetic corpus"
_SYNTH_FILLER = "the a of to in and on for with said after new at by from as its over two first year reuters ap".split()


def make_synthetic(n_rows: int, eval_fraction: float, seed: int) -> Corpus:
    """A labelled 4-class stand-in with a news-like length spread (NOT AG News).

    Word counts are log-normal around AG News' median of ~38 words (p90 ~60, long tail to ~200).
    """
    rng, labels = _synthetic_draw(n_rows, seed)
    topics = [t.split() for t in _SYNTH_TOPICS]
    n_words = np.clip(rng.lognormal(mean=np.log(38), sigma=0.35, size=n_rows), 6, 200).astype(int)
    texts = []
    for label, n in zip(labels, n_words):
        topical = rng.random(n) < 0.3
        words = [rng.choice(topics[label]) if t else rng.choice(_SYNTH_FILLER) for t in topical]
        texts.append(" ".join(words))
    tr, ev = split_indices(labels, eval_fraction, seed, SYNTHETIC)
    pick = lambda xs, idx: [xs[i] for i in idx]  # noqa: E731
    return Corpus(
        pick(texts, tr), pick(labels, tr), pick(texts, ev), pick(labels, ev), "synthetic",
        f"SYNTHETIC 4-class stand-in, not AG News ({n_rows:,} generated rows, {len(tr):,} train / {len(ev):,} eval)",
        [f"generated (seed {seed}) because no real data was used; lengths mimic a news-like spread"],
        {},
    )


def _synthetic_draw(n_rows: int, seed: int) -> tuple[np.random.Generator, list[int]]:
    """The synthetic corpus's generator after its first draw, the labels (which split_labels needs alone)."""
    rng = np.random.default_rng(seed)
    return rng, rng.integers(0, 4, n_rows).tolist()


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
