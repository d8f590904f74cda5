"""The labelled synthetic stand-in (NOT AG News): four classes of generated news-like text, drawn from a seed,
for when no real data is used."""

from __future__ import annotations

import numpy as np

from compile_study.core.dataset.corpus import Corpus
from compile_study.core.dataset.splits import split_indices

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


def synthetic_labels(n_rows: int, seed: int) -> list[int]:
    """The synthetic corpus's labels alone, as make_synthetic draws them (no text is generated)."""
    return _synthetic_draw(n_rows, seed)[1]


def _synthetic_draw(n_rows: int, seed: int) -> tuple[np.random.Generator, list[int]]:
    """The synthetic corpus's generator after its first draw, the labels (which synthetic_labels gives alone)."""
    rng = np.random.default_rng(seed)
    return rng, rng.integers(0, 4, n_rows).tolist()
