"""What the main text says, as numbers and codes: each configuration's intervals and verdict, the rankings and
comparisons as aggregate/decide.py decided them (decisions.json), the counts, the head of the paper. The
sentence templates (paper/templates/sections/*.j2) word them.

Every comparative word the paper uses comes from a code decided there: "fastest" only for a ranking whose top
is one configuration, "any of these" for a top of several (a chain of overlapping intervals), "faster than"
only where the comparison says "higher", a trend only where every configuration it speaks of agrees (or the
exceptions named); cells with fewer than MIN_N processes are named with their n and never ranked.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from compile_study.aggregate.decide import key, ordered
from compile_study.aggregate.paper_claims import TREND_ID, common_id, compare_id, top_id
from compile_study.aggregate.summary import compact
from compile_study.core import vocab
from compile_study.core.config import grid
from compile_study.report import numbers as n
from compile_study.report.document import plain

MODE_ORDER = {m: i for i, m in enumerate(vocab.COMPILE_MODES)}


@dataclass
class Context:
    summary: pd.DataFrame
    claims: pd.DataFrame | None
    decisions: dict  # decisions.json (aggregate/decide.py): rankings, comparisons, method-check verdicts
    env: dict
    facts: dict
    config: dict
    device: str
    figures: str  # the figure directory, relative to the paper
    calls: list[dict]  # calls.jsonl (core/calls/session.py); empty where the study was not run through it
    checks: dict  # the method checks' results ({"timer": rows, "drift": rows, "concurrency": its JSON})
    drawn: dict = field(default_factory=dict)  # the figures made (aggregate/figures/figures.py's index): only these are cited
    pool: dict = field(default_factory=dict)  # this study in the pool of its GPU kind (build.pool_of); {}: none
    in_progress: int | None = None  # the call the paper is made in, not yet in calls.jsonl (session.call_in_progress)

    def __post_init__(self) -> None:
        # one block per dtype (read_csv's block per column makes every column added to it warn), and text as plain
        # objects: the report selects rows hundreds of times, and each selection copies every column
        self.summary = compact(self.summary)
        self._rows = {tuple(key(r).values()): r for _, r in self.summary.iterrows()}
        self._precision = main_precision(self.summary)
        self._memo: dict = {}

    def named(self, k: dict) -> dict:
        """A configuration named by its key (decisions.json), as the templates name it."""
        return config(self._rows[tuple(k.values())])

    def has(self, k: dict) -> bool:
        """Whether this study ran the configuration a key names."""
        return tuple(k.values()) in self._rows

    def rankings(self, by: str) -> list[dict]:
        """The main precision's rankings of one kind (aggregate/decide.py RANKINGS), by batch size."""
        return sorted((r for r in self.decisions["rankings"] if r["by"] == by and r["precision"] == self.precision),
                      key=lambda r: r["batch"])

    def claim(self, rid: str) -> dict | None:
        """The paper's claim of that id (decisions.json `claims`, aggregate/paper_claims.py), None where it states
        none: a sentence that says something holds is worded from its record."""
        return next((c for c in self.decisions.get("claims", []) if c["id"] == rid), None)

    def stated(self, rule: str) -> list[dict]:
        """The claims of one rule."""
        return [c for c in self.decisions.get("claims", []) if c["rule"] == rule]

    def comparisons(self, what: str) -> list[dict]:
        return [c for c in self.decisions["comparisons"] if c["what"] == what]

    @property
    def head(self) -> pd.DataFrame:
        """Usable headline rows (static shapes, the module compiled)."""
        return vocab.usable(vocab.headline(self.summary))

    @property
    def precision(self) -> str | None:
        return self._precision

    @property
    def grids(self) -> list[dict]:
        return self.config["grids"][self.device]

    @property
    def train_rows(self) -> int:
        return int(self.facts["splits"]["train"]["rows"])

    @property
    def gpu(self) -> bool:
        return self.device == "cuda"

    @property
    def device_name(self) -> str:
        return value(self.env.get("device_name"))


def once(finding):
    """A finding made once per report: the sections, the abstract and the conclusions read the same one."""
    @functools.wraps(finding)
    def read(ctx: Context, *args):
        key = (finding.__name__, args)
        if key not in ctx._memo:
            ctx._memo[key] = finding(ctx, *args)
        return ctx._memo[key]
    return read


def main_precision(summary: pd.DataFrame) -> str | None:
    """The precision the abstract speaks of: bf16 where measured (what one trains in), else the most measured."""
    h = vocab.usable(vocab.headline(summary))
    if h.empty:
        return None
    return "bf16" if "bf16" in set(h.precision) else h.precision.value_counts().index[0]


def value(v) -> str:
    """A value of environment.json as the paper names it (several values joined)."""
    return plain(", ".join(map(str, v)) if isinstance(v, list) else v)


def compiled(df: pd.DataFrame) -> pd.DataFrame:
    return df[df.compile_mode != "eager"]


def regime_rows(ctx: Context) -> pd.DataFrame:
    """Every regime's rows (module scope, main precision) at the batch sizes where more than static shapes ran, by
    batch and regime: the main text's shapes table and the appendix's regime detail read the same rows."""
    s = ctx.summary[ctx.summary.precision == ctx.precision]
    sel = s[s.batch_size.isin(set(s[s.shape_regime != "static"].batch_size)) & (s.compile_scope == "module")]
    return ordered(sel, "batch_size", "shape_regime") if len(sel) else sel


def config(r) -> dict:
    """One configuration as the templates name it: labels, intervals, verdict code and the medians, each under its
    summary column's name (docs/columns.md: `steady_step_ms` the median, `step` the interval of `step_ms`)."""
    get = r.get if hasattr(r, "get") else (lambda k, d=None: getattr(r, k, d))
    return {"mode": get("compile_mode"), "scope": get("compile_scope"), "regime": get("shape_regime"),
            "kind": vocab.Regime.parse(get("shape_regime")).kind, "precision": get("precision"),
            "batch": int(get("batch_size")), "speedup": n.row_iv(r), "gain": n.row_iv(r, "gain"),
            "step": n.row_iv(r, "step"), "steady_step_ms": get("steady_step_ms"), "verdict": get("verdict"),
            "n_ok": int(get("n_ok")) if n.finite(get("n_ok")) else 0, "padding": get("padding_fraction"),
            "band": {"low": get("aa_low"), "high": get("aa_high")} if n.finite(get("aa_low")) else None}


def ranking(ctx: Context, r: dict) -> dict:
    """A ranking of decisions.json with its configurations as the templates name them: `top` (the group a
    recommendation may name), `apart` (pairs within it the rule orders), `below` and `few`."""
    return {"top": [ctx.named(k) for k in r["top"]],
            "apart": [{"lower": ctx.named(a["lower"]), "above": [ctx.named(k) for k in a["above"]]} for a in r["apart"]],
            "below": [ctx.named(k) for k in r["below"]], "few": [ctx.named(k) for k in r["few"]]}


def static_rows(ctx: Context, precision: str | None = None, scopes=vocab.TRAINING_SCOPES) -> pd.DataFrame:
    s = vocab.usable(ctx.summary[(ctx.summary.shape_regime == "static") & ctx.summary.compile_scope.isin(scopes)])
    return compiled(s[s.precision == (precision or ctx.precision)])


@once
def per_batch(ctx: Context) -> list[dict]:
    """Per batch size (main precision, static shapes, the scopes one trains with): the ranking by speedup."""
    return [{"batch": r["batch"], "claim": ctx.claim(top_id("speedup", r["precision"], r["batch"]))} | ranking(ctx, r)
            for r in ctx.rankings("speedup")]


def stated(b: dict) -> bool:
    """A ranking the paper may word: its group is a claim's record, or it ranks one configuration alone (no order)."""
    return bool(b["top"]) and (b["claim"] is not None or (len(b["top"]) == 1 and not b["below"]))


@once
def batch_trend(ctx: Context) -> dict | None:
    """Each compiled mode of the module at its precision's smallest and largest batch size, compared by the rule
    (aggregate/decide.py batch-trend): at the main precision, `higher` (its speedup measurably larger at the small
    batch) and `others` (every other, with its code: the trend's exceptions); `all`, whether the trend holds for
    every mode of every precision at the same two sizes (the abstract's count spans every precision)."""
    found = ctx.comparisons("batch-trend")
    mine = [c for c in found if c["a"]["precision"] == ctx.precision]
    if not mine:
        return None
    small, large = mine[0]["a"]["batch"], mine[0]["b"]["batch"]
    agree = [c for c in found if c["code"] == "higher" and (c["a"]["batch"], c["b"]["batch"]) == (small, large)]
    return {"small": small, "large": large, "higher": [ctx.named(c["a"]) for c in mine if c in agree],
            "others": [ctx.named(c["a"]) | {"code": c["code"]} for c in mine if c not in agree],
            "all": len(agree) == len(found) and ctx.claim(TREND_ID) is not None, "claim": ctx.claim(TREND_ID)}


@once
def verdicts(ctx: Context) -> dict:
    """Counts of verdict codes over the compiled static-shape configurations of the module (every precision); those
    faster or slower than eager counted from their claims' records (`claims`)."""
    counts = Counter(compiled(ctx.head).verdict)
    claims = [c for c in ctx.stated("verdict") if c["cells"][0]["scope"] == "module"]
    for code in ("faster", "slower"):
        counts[code] = sum(c["stated"] == code for c in claims)
    counts = Counter({k: v for k, v in counts.items() if v})
    decided = sum(v for k, v in counts.items() if k not in ("few-runs", "no-control", "no-run", "disturbed"))
    return {"counts": dict(counts), "decided": decided, "total": sum(counts.values()),
            "few": counts.get("few-runs", 0), "claims": claims}


@once
def precisions(ctx: Context) -> list[dict]:
    """The same mode, scope and batch size in two precisions: step time intervals compared by the rule."""
    return [{"mode": c["a"]["mode"], "batch": c["a"]["batch"], "fast": ctx.named(c["b"]), "slow": ctx.named(c["a"]),
             "code": c["code"], "claim": ctx.claim(compare_id("precision", c["a"], c["b"], c["code"]))}
            for c in ctx.comparisons("precision")]


@once
def shape_findings(ctx: Context) -> list[dict]:
    """Per batch size where more than static shapes ran: the compiled regimes' gains over eager on static batches
    (module scope, main precision) ranked by the rule, and the (mode, regime) pairs the grid planned there but
    the study did not make (a comparison with a side missing is named as such)."""
    module = ctx.summary[(ctx.summary.compile_scope == "module") & (ctx.summary.precision == ctx.precision)]
    planned = {(k.batch_size, k.compile_mode, k.shape_regime) for k in grid.expand(ctx.grids)
               if k.compile_scope == "module" and k.precision == ctx.precision}
    out = []
    for r in ctx.rankings("gain"):
        every = module[module.batch_size == r["batch"]]
        made = {(x.compile_mode, x.shape_regime) for x in every.itertuples()}  # failed runs were made: not "missing"
        missing = sorted({(m, g) for bb, m, g in planned if bb == r["batch"]} - made,
                         key=lambda mr: (MODE_ORDER[mr[0]], mr[1]))
        usable = vocab.usable(every)
        unmeasured = usable[(usable.compile_mode != "eager") & (usable.gain_method == "no eager static runs")]
        found = {"batch": r["batch"], "missing": missing, "claim": ctx.claim(top_id("gain", r["precision"], r["batch"])), "no_yardstick": [config(x) for _, x in
                                                                          ordered(unmeasured).iterrows()]} | ranking(ctx, r)
        eager = {x.shape_regime: x for _, x in usable[usable.compile_mode == "eager"].iterrows()}
        for c in found["top"] + found["below"] + found["few"]:  # eager on the same batches, beside each compiled gain
            c["eager"] = config(eager[c["regime"]]) if c["regime"] != "static" and c["regime"] in eager else None
        out.append(found)
    return out


@once
def mfu(ctx: Context) -> dict | None:
    """The range of MFU over every usable configuration of the main precision (every scope and shape regime),
    with its two ends named."""
    ok = vocab.usable(ctx.summary).dropna(subset=["mfu"])
    ok = ok[ok.precision == ctx.precision]
    if ok.empty:
        return None
    lo, hi = ok.loc[ok.mfu.idxmin()], ok.loc[ok.mfu.idxmax()]
    return {"low": config(lo) | {"mfu": lo.mfu}, "high": config(hi) | {"mfu": hi.mfu, "real_mfu": hi.get("real_mfu")},
            "peak": hi.peak_tflops, "precision": ctx.precision, "same": lo.name == hi.name, "count": len(ok)}


def claims(ctx: Context) -> list[dict]:
    """claims.csv as the templates read it: id, verdict code, evidence (numbers and codes)."""
    if ctx.claims is None or ctx.claims.empty:
        return []
    return [{"id": r.claim, "verdict": r.verdict, "evidence": json.loads(r.evidence), "claim": ctx.claim(common_id(r.claim))}
            for r in ctx.claims.itertuples()]


def claim_counts(ctx: Context) -> dict:
    cs = claims(ctx)
    return {"total": len(cs), "counts": dict(Counter(c["verdict"] for c in cs)),
            "by": {v: [c["id"] for c in cs if c["verdict"] == v] for v in dict.fromkeys(c["verdict"] for c in cs)}}


def model(ctx: Context) -> dict:
    """The one description of the model the paper names: the built-in one's sizes from the config, or, for a
    plugged model (model.factory, model.hf_config), what its records say: its plug, class and parameters."""
    m = ctx.config["model"]
    out = {"kind": "transformer", **m, "vocab_size": ctx.facts["vocab_size"], "lr": ctx.config["train"]["lr"],
           "plugged": bool(m.get("factory") or m.get("hf_config"))}
    for column in ("model_plug", "model_class", "model_params"):  # the records' own account of the model
        known = ctx.summary[column].dropna() if column in ctx.summary else ()
        out[column.removeprefix("model_")] = known.iloc[0] if len(known) else None
    return out | {"size": vocab.hf_size(m.get("hf_config"))}  # a transformers plug's layers and width, as its config says


def data_facts(ctx: Context) -> dict:
    """The data as used: the corpus's description, rows available and used, the cap if one was set."""
    train = ctx.facts["splits"]["train"]
    static = ctx.summary[ctx.summary.shape_regime == "static"]
    static = static.dropna(subset=["epoch_rows"]) if "epoch_rows" in static else static.iloc[:0]
    epochs = [(int(b), int(g.epoch_steps.iloc[0]), int(g.epoch_rows.iloc[0])) for b, g in static.groupby("batch_size")]
    return {"description": plain(ctx.facts["description"]), "rows": int(train["rows"]), "epochs": epochs,
            "available": int(train.get("rows_available", train["rows"])), "synthetic": ctx.facts.get("source") == "synthetic",
            "percentiles": train["token_length_percentiles"], "pad": train["pad_fraction_at_max_len"],
            "max_len": ctx.facts["max_len"]}
