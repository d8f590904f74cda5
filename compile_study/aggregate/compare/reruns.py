"""What the stored studies say of each other: the host effect estimated from them, every pair of them judged by
the reproduction rule, and a leave-one-study-out check of the estimate (torch-free).

    found = reruns.build()          # what reference/host-effect.json holds (report/compare/host_effect.py writes it)
    python -m compile_study host-effect README.md       # the file and the README's block

Studies enter when they are stored under reference/, ran the built-in model (a plugged model's study answers
another question), and trained on the same data as the others of their device kind (the GPU's name: hosts of
one kind); each configuration's protocol is checked by the rule itself (aggregate/compare/measured.py), and a pair of
studies shares only the configurations both ran. Per kind:

- the estimate: aggregate/compare/hosts.py `estimate` over all of its studies;
- pairs: each two studies, the one with more run records (then the earlier name) as the stored side, judged by
  aggregate/compare/compare.py with that estimate, and without any host effect (the rule before it), verdicts counted;
- leave one study out: for each study, the estimate made without it, and the pairs it is part of judged again
  with that estimate: a verdict that changes rests on the study it judges. The count of changed verdicts over
  all judged (study, pair, configuration) is the check;
- the configurations of the class hosts move most, laid side by side across the studies (aggregate/spread.py).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from compile_study.aggregate import spread
from compile_study.aggregate.compare import compare as cmp
from compile_study.aggregate.compare import hosts, measured, pool
from compile_study.core import compile_record, record
from compile_study.core.layout import PROJECT, STORED, Layout, is_stored_study, stored_studies


def _model(directory: Path) -> dict:
    model = record.read(Layout(str(directory)).stored_records()[0])["config"]["model"]
    return {k: v for k, v in model.items() if k not in ("vocab_size", "n_classes")}


def stored(project: str | Path = PROJECT) -> dict[str, dict[str, cmp.Study]]:
    """The stored studies of the built-in model, per device kind (GPU name): {kind: {name: Study}}, each kind's
    studies those that trained on the data of its study with the most records (names: reference/<dir>)."""
    root = Path(project)
    kinds: dict[str, dict[str, cmp.Study]] = {}
    for d in stored_studies(Layout(".").config, root / STORED):
        model = _model(d) if is_stored_study(d) else None
        if model is None or model.get("name") or model.get("factory") or model.get("hf_config"):
            continue
        study = cmp.load(d)
        names = set(study.records.device_name.dropna())
        if len(names) == 1:
            kinds.setdefault(names.pop(), {})[f"{STORED}/{d.name}"] = study
    return {kind: _same_data(found) for kind, found in kinds.items()}


def _same_data(found: dict[str, cmp.Study]) -> dict[str, cmp.Study]:
    first = max(found, key=lambda n: (len(found[n].records), n))
    return {n: s for n, s in found.items()
            if not measured.data_table(found[first].facts, s.facts).differs.any()}


def pairs(names: list[str], studies: dict[str, cmp.Study]) -> list[tuple[str, str]]:
    """Each two studies as (stored, study): the stored side the one with more records, then the earlier name."""
    order = sorted(names, key=lambda n: (-len(studies[n].records), n))
    return [(a, b) for i, a in enumerate(order) for b in order[i + 1:]]


def _tables(studies: dict[str, cmp.Study], kind: str, effect: dict, among: list[tuple[str, str]]) -> dict:
    wrapped = {"kinds": {kind: {"classes": effect}}}
    return {pair: cmp.compare(studies[pair[0]], studies[pair[1]], pair, host_effect=wrapped).table for pair in among}


def _estimate(studies: dict[str, cmp.Study], names) -> dict:
    return hosts.effect_dict(hosts.estimate({n: studies[n].records for n in names}))


def leave_one_out(studies: dict[str, cmp.Study], kind: str, full: dict[tuple, pd.DataFrame]) -> dict:
    """For each study: the pairs it is part of judged with the estimate made without it, against `full` (the
    pairs' tables with every study's estimate): verdicts judged, changed, and which."""
    by_study, judged, changed = {}, 0, 0
    for left in studies:
        effect = _estimate(studies, [n for n in studies if n != left])
        mine = [p for p in full if left in p]
        again = _tables(studies, kind, effect, mine)
        rows = []
        for pair in mine:
            before, after = full[pair], again[pair]
            ok = before.verdict != "not comparable"
            for (_, b), (_, a) in zip(before[ok].iterrows(), after[ok].iterrows()):
                if _said(b) != _said(a):
                    rows.append({"pair": list(pair), "configuration": [b[k] for k in cmp.KEY],
                                 "with_it": _said(b), "without_it": _said(a)})
            judged += int(ok.sum())
        changed += len(rows)
        by_study[left] = {"judged": sum(int((full[p].verdict != "not comparable").sum()) for p in mine),
                          "changed": len(rows), "estimate_without": effect, "changes": rows}
    return {"judged": judged, "changed": changed, "by_study": by_study}


def _said(row: pd.Series) -> str:
    return f"{row.verdict}: {row.reason}" if isinstance(row.reason, str) else row.verdict


def check(studies: dict[str, cmp.Study], kind: str, project: str | Path = PROJECT) -> dict:
    """One kind's estimate, its pairs' verdict counts (with it and without any host effect) and the
    leave-one-study-out check."""
    names = sorted(studies)
    effect = _estimate(studies, names)
    among = pairs(names, studies)
    full = _tables(studies, kind, effect, among)
    bare = _tables(studies, kind, {}, among)
    judged = [{"stored": a, "study": b, "counts": cmp.counts(full[a, b]), "without_host_effect": cmp.counts(bare[a, b]),
               "verdicts": {" ".join(str(r[k]) for k in cmp.KEY): _said(r) for _, r in full[a, b].iterrows()}}
              for a, b in among]
    return {"studies": names, "classes": effect, "pairs": judged, "leave_one_out": leave_one_out(studies, kind, full),
            "spread": launched(studies, project)}


def launched(studies: dict[str, cmp.Study], project: str | Path = PROJECT) -> list[dict]:
    """The shared configurations of the class the host moves most (compiled, waiting on the host, at a large
    batch), each laid side by side across the studies (aggregate/spread.py between), with each study's cold
    compiles' generated kernels (the first's cache is the one every timed process starts from) and whether the
    studies' profiled top kernels agree."""
    records = {n: s.records for n, s in studies.items()}
    found = hosts.shared_cells(records)
    keys = sorted({tuple(r[k] for k in hosts.KEY) for _, r in found[found["class"] == hosts.WAITS].iterrows()})
    compiles = {n: compile_record.table(Layout(str(Path(project) / n)).stored_compiles()) for n in studies}
    out = []
    for key in keys:
        side = [f | {"cold_compiles": spread.cold_compiles(compiles[f["study"]], key)}
                for f in spread.between(records, key)]
        firsts = [f["cold_compiles"][0] for f in side if f["cold_compiles"]]
        out.append({"configuration": [k.item() if hasattr(k, "item") else k for k in key], "studies": side,
                    "kernels": spread.kernels_agree(side),
                    "compiles_differ": any(len(set(f["cold_compiles"])) > 1 for f in side),
                    "first_loaded": len(firsts) == len(side) and all(
                        f["generated_kernels"] == [f["cold_compiles"][0]] * 2 for f in side)})
    return out


def build(project: str | Path = PROJECT) -> dict:
    """Every device kind's check (the kinds with two or more stored studies) and every kind's pool (its stored
    studies' cells, aggregate/compare/pool.py): what host-effect.json holds."""
    found = stored(project)
    return {"method": hosts.METHOD, "large_batch": hosts.LARGE_BATCH,
            "kinds": {kind: check(studies, kind, project) for kind, studies in found.items() if len(studies) >= 2},
            "pools": {kind: pool.entry(studies) for kind, studies in found.items()}}
