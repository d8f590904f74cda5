"""What the project README opens with, decided from the pools of the stored studies' kinds (pool.ratios) and the
paper's claims judged across kinds (reference/kinds.json, kinds.py): codes and numbers only, worded by
report/docs/opening.py (torch-free).

    found = opening.from_project(project)     # or opening.decide(pools, kinds_json) on inputs of one's own

  kinds    every kind whose pool holds MIN_POOL or more stored studies, the largest pool first (then by name),
           with its bf16 static configurations as pool.ratios gives them: (batch, mode, scope) -> the pooled
           speedup, the prediction interval for a new host (low, high), the studies pooled (k) and the pool's
           verdict against eager ("faster", "within eager's band", "slower", "no prediction")
  batches  the smallest and the largest batch size of the first kind's pool
  shown    per batch, of the scopes one trains with (vocab.TRAINING_SCOPES), the configuration whose verdict on the
           first kind's pool is "faster", pooled over the most studies, then of the largest pooled speedup, then
           first in the vocabulary's order; None where none is "faster"
  held     every configuration of those scopes and batches whose verdict is not "faster" on some kind, with each
           such kind's verdict, by batch and the vocabulary's order
  claims   the claims the kinds' papers state (kinds.json): the kinds, how many claims, how many hold on every
           kind, and per other claim its weakest code ("does-not-hold" before "cannot-tell") and on how many kinds
           it does not hold
"""

from __future__ import annotations

import json
from pathlib import Path

from compile_study.aggregate.compare import hosts, pool
from compile_study.core import vocab
from compile_study.core.layout import host_effect_path, kinds_path

MIN_POOL = 2  # stored studies a kind's pool needs before the README speaks for the kind
FASTER = "faster"
MODE_ORDER = {m: i for i, m in enumerate(vocab.COMPILE_MODES)}
SCOPE_ORDER = {s: i for i, s in enumerate(vocab.COMPILE_SCOPES)}


def _order(key: tuple) -> tuple:
    batch, mode, scope = key
    return batch, MODE_ORDER.get(mode, len(MODE_ORDER)), SCOPE_ORDER.get(scope, len(SCOPE_ORDER))


def _trained(cells: dict[tuple, dict]) -> dict[tuple, dict]:
    return {k: c for k, c in cells.items() if k[2] in vocab.TRAINING_SCOPES and k[1] != "eager"}


def shown(cells: dict[tuple, dict], batch: int) -> tuple | None:
    """The configuration (batch, mode, scope) the README quotes at a batch (module docstring), None without one."""
    faster = [k for k, c in _trained(cells).items() if k[0] == batch and c["verdict"] == FASTER]
    return min(faster, key=lambda k: (-cells[k]["k"], -cells[k]["speedup"], _order(k)), default=None)


def held(kinds: list[dict], batches: list[int]) -> list[dict]:
    """Each configuration at the quoted batches not shown faster than eager on some kind: its key and, per such
    kind, the pool's verdict."""
    keys = sorted({k for kind in kinds for k in _trained(kind["cells"]) if k[0] in batches}, key=_order)
    out = []
    for key in keys:
        verdicts = {kind["kind"]: kind["cells"][key]["verdict"] for kind in kinds
                    if key in kind["cells"] and kind["cells"][key]["verdict"] != FASTER}
        if verdicts:
            out.append({"key": key, "verdicts": verdicts})
    return out


def claims(across: dict | None) -> dict:
    """The claims across kinds (kinds.json): the kinds, how many, how many hold on every kind, and the others'
    weakest codes with on how many kinds each does not hold."""
    found = (across or {}).get("claims") or []
    others = []
    for c in found:
        if c["everywhere"]:
            continue
        codes = [code for code in c["codes"].values() if code != "holds"]
        others.append({"id": c["id"], "code": "does-not-hold" if "does-not-hold" in codes else "cannot-tell",
                       "kinds": len(codes)})
    return {"kinds": [k for k, _ in (across or {}).get("kinds") or []], "total": len(found),
            "everywhere": sum(bool(c["everywhere"]) for c in found), "others": others}


def decide(pools: dict[str, dict], across: dict | None) -> dict:
    """The opening's codes and numbers (module docstring) from each kind's pool, {kind: {"studies": [names],
    "cells": pool.ratios}}, and the finding across kinds as kinds.json holds it."""
    kinds = sorted(({"kind": kind, "studies": len(p["studies"]), "cells": p["cells"]} for kind, p in pools.items()
                    if len(p["studies"]) >= MIN_POOL and p["cells"]), key=lambda k: (-k["studies"], k["kind"]))
    batches = sorted({k[0] for k in _trained(kinds[0]["cells"])}) if kinds else []
    batches = sorted({batches[0], batches[-1]}) if batches else []
    return {"kinds": kinds, "batches": batches,
            "shown": {b: shown(kinds[0]["cells"], b) for b in batches},
            "held": held(kinds, batches), "claims": claims(across)}


def from_project(project: Path) -> dict:
    """decide on the project's stored pools (reference/host-effect.json) and kinds.json."""
    stored = hosts.load(host_effect_path(project))
    pools = {kind: {"studies": pool.studies(stored, kind), "cells": pool.ratios(stored, kind)}
             for kind in sorted(stored.get("pools") or {}) if len(pool.studies(stored, kind)) >= MIN_POOL}
    path = kinds_path(project)
    return decide(pools, json.loads(path.read_text()) if path.is_file() else None)
