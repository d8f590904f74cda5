"""The paper's "Where a cold start's seconds go": one sentence per mode on the stage its cold compiles spend most
in, what a portable start and a warm load skip, a table of each stage's seconds with its interval per
configuration and way, and the stages figure; or, for a study whose records predate the stages, that they were not
measured (never zeros). Every number and code is aggregate/stages.py's (environment.json "compile_stages").
"""

from __future__ import annotations

from compile_study.core.compile_stages import STAGES
from compile_study.report import numbers as n
from compile_study.report.document import Column, Figure, Para, Section, Table, Text
from compile_study.report.paper import words

TITLE = "Where a cold start's seconds go"
FILE = "stages"


def _cell(d: dict) -> str:
    """A stage's mean seconds with its interval where it has one ('12.3 [11.0, 13.6]'), else the mean and n."""
    if d["n"] >= 3 and n.finite(d["low"]) and n.finite(d["high"]):
        return f"{n.sig(d['point'], 3)} [{n.sig(d['low'], 3)}, {n.sig(d['high'], 3)}]"
    return f"{n.sig(d['point'], 3)} (n = {d['n']})"


def shown(data: dict) -> list[str]:
    """The stages some process spent time in (the others' columns are left out, and the caption names them)."""
    return [s for s in STAGES if any(r["stages"][s]["point"] > 0 for r in data["rows"])]


def table(data: dict, gpu: bool) -> Table:
    cols_shown = shown(data)
    rows = [[f"{r['compile_mode']} ({r['compile_scope']})", r["shape_regime"], r["precision"], str(int(r["batch_size"])),
             words(Text(FILE, "way", {"way": r["way"]})), str(r["n"]),
             *[_cell(r["stages"][s]) for s in cols_shown], _cell(r["rest"]), _cell(r["latency"])] for r in data["rows"]]
    cols = [Column("what runs"), Column("shapes"), Column("precision"), Column("batch", "r"), Column("start"),
            Column("n", "r"), *[Column(words(Text(FILE, "stage", {"stage": s})), "r") for s in cols_shown],
            Column("rest", "r"), Column("latency (s)", "r")]
    left_out = [s for s in STAGES if s not in cols_shown and (gpu or s != "cudagraph")]  # no CPU records graphs
    return Table(FILE, Text(FILE, "table_caption", {"left_out": left_out}), cols, rows)


def section(ctx) -> Section:
    data = ctx.env.get("compile_stages") or {"measured": False}
    if not data.get("measured"):
        return Section(TITLE, [Para(Text(FILE, "not_measured", {}))])
    figure = "stages" in ctx.drawn
    blocks = [Para(Text(FILE, "modes", {"modes": data["modes"], "figure": figure})),
              Para(Text(FILE, "skipped", {"skipped": data.get("skipped") or {}})), table(data, ctx.gpu)]
    if figure:
        blocks.append(Figure("stages", Text(FILE, "stages_caption", ctx.drawn["stages"]), f"{ctx.figures}/stages"))
    return Section(TITLE, blocks)
