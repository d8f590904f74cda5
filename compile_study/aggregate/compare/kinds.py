"""Across GPU kinds, as a finding: each configuration that stored studies of several kinds share, its speedup
interval on each kind, and which of the paper's claims hold on every kind (torch-free).

    found = across(kind_studies(project))   # None where the stored studies hold fewer than two kinds

One study speaks for a kind: its full grid (the stored study named *-full-* on it), else its study with the most
configurations; only studies of the built-in model count (another model's speedups are aggregate/compare/models.py's).
No rule judges one kind's speedup by another's (how much they differ is what this shows); each kind's claims
(aggregate/paper_claims.py) are judged on every other kind's study by aggregate/compare/rejudge.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from compile_study.aggregate.columns import interval_of, key
from compile_study.aggregate.compare import rejudge
from compile_study.aggregate.decide import interval_json
from compile_study.core import digits, vocab
from compile_study.core.io import write_text_atomic
from compile_study.core.layout import STORED, Layout, kinds_path, stored_studies


@dataclass(frozen=True)
class KindStudy:
    """The study that speaks for one GPU kind: its name, the kind, its cells and facts, and its claims."""

    name: str
    kind: str
    subject: rejudge.Subject
    claims: list[dict]


def _plugged(directory: Path) -> bool:
    import yaml

    model = yaml.safe_load(Path(Layout(str(directory)).config).read_text()).get("model") or {}
    return bool(model.get("hf_config") or model.get("factory"))


def kind_studies(project: Path) -> list[KindStudy]:
    """Per GPU kind among the stored studies (reference/*) of the built-in model: the study that speaks for it."""
    by_kind: dict[str, list[Path]] = {}
    for d in stored_studies("summary.csv", Path(project) / STORED):
        env = json.loads(Path(Layout(str(d)).environment).read_text())
        if env.get("device_type") == "cuda" and not _plugged(d):
            by_kind.setdefault(env["device_name"], []).append(d)
    out = []
    for kind, dirs in sorted(by_kind.items()):
        full = [d for d in dirs if "-full-" in d.name]
        d = full[-1] if full else max(dirs, key=lambda x: len(pd.read_csv(Layout(str(x)).summary)))
        out.append(KindStudy(str(d.relative_to(project)), kind, rejudge.subject(d), rejudge.stored_claims(d)))
    return out


def shared_cells(studies: list[KindStudy]) -> pd.DataFrame:
    """Each compiled configuration every kind's study has with numbers, its speedup interval on each kind."""
    frames = []
    for s in studies:
        u = vocab.usable(s.subject.summary)
        u = u[u.compile_mode != "eager"]
        frames.append({tuple(key(r).values()): interval_of(r) for _, r in u.iterrows()})
    keys = sorted(set.intersection(*(set(f) for f in frames)), key=lambda k: (k[3], k[4], k[2], k[1], k[0]))
    rows = [dict(zip(("mode", "scope", "regime", "precision", "batch"), k))
            | {s.kind: frame[k] for s, frame in zip(studies, frames)} for k in keys]
    return pd.DataFrame(rows)


def every_kind(studies: list[KindStudy]) -> list[dict]:
    """Each kind's claims judged on every kind's study: per claim, its id, the kinds that state it (one entry for a
    claim several kinds' papers state alike) and its code on each kind (rejudge.CODES); `everywhere` where it holds
    on all."""
    out: dict[tuple, dict] = {}
    for s in studies:
        judged = {o.kind: rejudge.rejudge(s.claims, o.subject) for o in studies}
        for i, c in enumerate(s.claims):
            same = (c["id"], json.dumps(c["stated"], sort_keys=True))
            if same in out:
                out[same]["stated_on"].append(s.kind)
                continue
            codes = {kind: judged[kind][i]["code"] for kind in judged}
            out[same] = {"id": c["id"], "stated_on": [s.kind], "codes": codes,
                         "everywhere": all(v == "holds" for v in codes.values())}
    return list(out.values())


def to_json(found: dict | None) -> dict:
    """The finding as kinds.json (layout.KINDS) holds it ({"kinds": []} with fewer than two kinds)."""
    if not found:
        return {"kinds": [], "cells": [], "claims": []}
    cells = [{k: r[k] for k in ("mode", "scope", "regime", "precision", "batch")}
             | {"intervals": {kind: interval_json(r[kind]) for kind, _ in found["kinds"]}}
             for _, r in found["cells"].iterrows()]
    return {"kinds": [list(k) for k in found["kinds"]], "cells": cells, "claims": found["claims"]}


def write(project: Path) -> Path:
    """`python -m compile_study rebuild --all` writes the project's finding across kinds (layout.kinds_path)."""
    path = kinds_path(project)
    write_text_atomic(path, digits.dumps(to_json(across(kind_studies(project))), indent=1, sort_keys=True) + "\n")
    return path


def across(studies: list[KindStudy]) -> dict | None:
    """The finding: the kinds (with the study for each), the shared cells' intervals and the claims on every kind;
    None with fewer than two kinds."""
    if len(studies) < 2:
        return None
    return {"kinds": [(s.kind, s.name) for s in studies], "cells": shared_cells(studies), "claims": every_kind(studies)}
