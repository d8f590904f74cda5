"""What every source of the study's data gives: a `Corpus` (texts and 0-based labels of the train and eval
splits, with where they came from), the four classes it labels, and the `DataError` that bad input raises."""

from __future__ import annotations

from dataclasses import dataclass

from compile_study.core.errors import InputError

CLASSES = ("World", "Sports", "Business", "Sci/Tech")


class DataError(InputError):
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
