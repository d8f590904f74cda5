"""AG News' CSV layout: finding train.csv and test.csv in a directory, reading them (a malformed row fails
naming file and line), checking their sha256 against AG News' own, and loading them as a corpus."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import stat
from pathlib import Path

from compile_study.core.dataset.corpus import Corpus, DataError
from compile_study.core.dataset.splits import split_indices

# sha256 of the original AG News CSV files (checked, and named in the facts when they match)
KNOWN_SHA256 = {
    "train.csv": "76a0a2d2f92b286371fe4d4044640910a04a803fdd2538e0f3f29a5c6f6b672e",
    "test.csv": "521465c2428ed7f02f8d6db6ffdd4b5447c1c701962353eb2c40d548c3c85699",
}

# what load_csv reads; train.csv without test.csv is refused (the study evaluates on test.csv)
CSV_LAYOUT = "AG News CSV layout: test.csv, either beside train.csv or alone (then split by data.eval_fraction)"


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
