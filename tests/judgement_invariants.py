"""The paper's judgements, round two (issue 51): every sentence true for every configuration it speaks of (what
compiling costs and the figures: tests/cost_invariants.py). Each checker returns the violations it finds;
tests/paper_invariants.py registers them in INVARIANTS, and tests/test_invariants.py shows each one failing on a
hand-made study whose paper breaks it the way an earlier paper did. Each re-derives what it checks from
summary.csv, the method checks' files and the parity table with core/stats.py and scipy, not from the report's
own decisions.

A Paper's context (tests/generated_studies.py) holds what these read beyond the summary and the report: `runs`
(the run records' table), `compiles` (the compile records' table), `checks` (the method checks by name),
`decisions`, `drawn` (the figures' index), `parity` (parity.csv), `facts` and `readme`.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from scipy import stats as sstats

from compile_study.aggregate.summary import HOST_BOUND
from compile_study.core import stats, vocab
from compile_study.report import numbers
from compile_study.report.paper import sentences, words

from .paper_reading import abstract_sentences, iv, main_text, part, plain, row_of, table, text

TRAINING = ("module", "fused-adamw", "step", "step-graph")


def one_chain(intervals: list) -> bool:
    """Do the intervals join into one stretch (each overlapping the union of those below it)?"""
    ivs = sorted(intervals, key=lambda i: i.low)
    reach = ivs[0].high
    for i in ivs[1:]:
        if i.low > reach:
            return False
        reach = max(reach, i.high)
    return True


KEY = ["compile_mode", "compile_scope", "shape_regime", "precision", "batch_size"]


def _narrow(df: pd.DataFrame, *prefixes: str, extra=()) -> pd.DataFrame:
    """The key columns, an interval's columns per prefix and `extra`: itertuples over a wide summary is slow."""
    cols = KEY + [c for p in prefixes for c in (("speedup" if p == "speedup" else "gain_over_eager_static"),
                                                f"{p}_low", f"{p}_high", f"{p}_method", f"{p}_n")] + list(extra)
    return df[list(dict.fromkeys(c for c in cols if c in df))]


def _key(r) -> tuple:
    return (r.compile_mode, r.compile_scope, r.shape_regime, r.precision, int(r.batch_size))


def _compiled_static(summary: pd.DataFrame, scopes=TRAINING) -> pd.DataFrame:
    s = vocab.usable(summary[(summary.shape_regime == "static") & summary.compile_scope.isin(scopes)])
    return s[s.compile_mode != "eager"]


# --- 1. one answer per batch size: the fastest, and the soonest to pay back among those not shown slower ----------------
ANY_OF = re.compile(r"use any of|recommends any of")


def _answer(cand: pd.DataFrame) -> set[tuple]:
    """What aggregate/advice.py may recommend among a batch size's configurations shown faster than eager,
    re-derived from their intervals: the fastest, and per way the peer (not shown slower) that pays back soonest."""
    fastest = cand.loc[cand.speedup.idxmax()]
    peers = cand[[stats.compare(iv(r), iv(fastest)) != "lower" for r in cand.itertuples()]]
    allowed = {_key(fastest)}
    for column in ("break_even_steps", "portable_break_even_steps", "warm_break_even_steps"):
        known = peers[np.isfinite(pd.to_numeric(peers.get(column), errors="coerce"))] if column in peers else peers.iloc[:0]
        if len(known):
            allowed.add(_key(known.loc[pd.to_numeric(known[column]).idxmin()]))
    return allowed


def recommendations_separated(paper) -> list[str]:
    """No sentence recommends a set the rule leaves unordered or orders ("any of"); where no pool speaks for the
    GPU kind, each batch size's recommended configurations (the payback table's) are faster than eager and each
    either the fastest or, among those not shown slower than it, the soonest to pay back by one way."""
    out = [f"a set recommended: {m[0]!r}" for m in ANY_OF.finditer(paper.markdown)]
    rule, modes = text(paper.report, "payback", "rule"), text(paper.report, "conclusions", "modes")
    if rule is None or (modes is not None and modes.data.get("pooled", 0) >= 2):
        return out
    chosen = {(c["mode"], c["scope"], c["regime"], c["precision"], c["batch"]) for c in rule.data["p"]["rows"]
              if c["recommended"]}
    s = _compiled_static(paper.summary, vocab.TRAINING_SCOPES)  # the scopes aggregate/advice.py answers among
    ways = ("break_even_steps", "portable_break_even_steps", "warm_break_even_steps")
    s = _narrow(s[(s.verdict == "faster") & (s.speedup_n >= stats.MIN_N)], "speedup", extra=ways)
    for k in sorted(chosen):
        cand = s[(s.precision == k[3]) & (s.batch_size == k[4])]
        if cand.empty or k not in _answer(cand):
            out.append(f"{k[0]} ({k[1]}) at batch {k[4]} is recommended, yet it is neither the fastest shown faster "
                       "than eager nor the soonest to pay back among those not shown slower than it")
    return out


# --- 1./3. a trend only where it holds for every configuration it names ------------------------------------------------
TREND = re.compile(r"by more at batch (\d+) than at batch (\d+)")
MAIN_TREND = re.compile(r"Against batch (\d+), the speedup at batch (\d+) is (.*)")
NAME = re.compile(r"`([\w-]+)` \(([\w-]+)\)")


def _trend_codes(summary: pd.DataFrame, small: int, large: int, precision: str | None = None) -> dict:
    """(mode, precision) -> the rule's code of its module speedup at `small` against `large`."""
    s = _compiled_static(summary, ("module",))
    out = {}
    for (mode, p), g in s.groupby(["compile_mode", "precision"]):
        a, b = g[g.batch_size == small], g[g.batch_size == large]
        if len(a) and len(b) and precision in (None, p):
            out[(mode, p)] = stats.compare(iv(a.iloc[0]), iv(b.iloc[0]))
    return out


def trends_hold(paper) -> list[str]:
    """The abstract's "by more at batch S than at batch L" holds for every compiled mode of the module measured at
    both (every precision); the main text's trend sentence calls "larger" only modes whose speedup is measurably
    larger at S, and names every mode measured at both."""
    out = []
    first = abstract_sentences(paper.markdown)[:1]
    m = TREND.search(first[0]) if first else None
    if m:
        codes = _trend_codes(paper.summary, int(m[1]), int(m[2]))
        out += [f"the takeaway's trend does not hold for {mode} ({p}): {code}" for (mode, p), code in codes.items()
                if code != "higher"]
    for sentence in sentences(main_text(paper.markdown)):
        m = MAIN_TREND.match(sentence)
        if not m:
            continue
        precision = _main_precision(paper.summary)
        codes = _trend_codes(paper.summary, int(m[2]), int(m[1]), precision)
        larger = m[3].split(";")[0]
        named = {mode for mode, _ in NAME.findall(m[3])}
        out += [f"the trend sentence calls {mode} larger: {codes.get((mode, precision))}"
                for mode, _ in NAME.findall(larger) if larger.startswith("larger") and codes.get((mode, precision)) != "higher"]
        out += [f"the trend sentence leaves out {mode}" for mode, _ in codes if mode not in named]
    return out


def _main_precision(summary: pd.DataFrame) -> str | None:
    h = vocab.usable(vocab.headline(summary))
    return None if h.empty else "bf16" if "bf16" in set(h.precision) else h.precision.value_counts().index[0]


# --- 6./8. a sentence whose evidence is absent is not written ---------------------------------------------------------------
PADDING = re.compile(r"At batch (\d+), padding to max_len costs nothing")


def evidence_present(paper) -> list[str]:
    """"Padding to max_len costs nothing" only where a compiled bucketed or packed configuration (three processes or
    more) ranks measurably below static shapes in gain at that batch size; "every precision" only where more than
    one ran; "in every profiled configuration the host sets the pace" only where every profiled compiled step and
    eager's are above the host bound (the best-step table); capturing the whole step only where step-graph ran."""
    out, md, s = [], main_text(paper.markdown), paper.summary
    for m in PADDING.finditer(md):
        at = vocab.usable(s[(s.batch_size == int(m[1])) & (s.compile_mode != "eager") & (s.compile_scope == "module")])
        static = at[(at.shape_regime == "static") & (at.gain_n >= stats.MIN_N)]
        less = at[[vocab.Regime.parse(x).kind in ("bucketed", "packed") for x in at.shape_regime]]
        if not any(stats.compare(iv(a, "gain"), iv(b, "gain")) == "higher" for a in _narrow(static, "gain").itertuples()
                   for b in _narrow(less, "gain").itertuples()):
            out.append(f"at batch {m[1]} 'padding to max_len costs nothing' with no compiled regime that pads less below it")
    if "in every precision" in md and vocab.usable(vocab.headline(s)).precision.nunique() < 2:
        out.append("'every precision' with one precision")
    if "In every profiled configuration the host sets the pace" in md:
        h = _compiled_static(s[s.precision == _main_precision(s)], ("module", "fused-adamw", "step-graph"))
        h = h[pd.to_numeric(h.host_ratio, errors="coerce").notna()]
        out += [f"the host is said to set the pace of {r.compile_mode} ({r.compile_scope}) at batch {r.batch_size}, "
                f"{r.host_ratio:.2f}x its device-busy time" for r in _narrow(h, extra=["host_ratio"]).itertuples()
                if not r.host_ratio > HOST_BOUND]
    if "capturing the whole step in one CUDA graph" in md.lower() and not (s.compile_scope == "step-graph").any():
        out.append("the whole step in one CUDA graph is spoken of, and no step-graph configuration ran")
    return out


# --- 7. the timer check's correction only where it timed both sides --------------------------------------------------------
def timer_corrections(paper) -> list[str]:
    """A speedup is corrected by the timer check only where the check timed eager at the same batch size and
    precision; the appendix states the spread of each disagreeing row's rounds."""
    out = []
    rows = ((paper.context.get("checks") or {}).get("timer_check") or {}).get("results", [])
    eager = {(r["batch_size"], r["precision"]) for r in rows if r["compile_mode"] == "eager"}
    found = ((paper.context.get("decisions") or {}).get("checks") or {}).get("timer") or []
    for f in found:
        c = f["config"]
        if f.get("moved") and (c["batch"], c["precision"]) not in eager:
            out.append(f"{c['mode']} at batch {c['batch']} is corrected by a timer check that did not time eager there")
    para = text(paper.report, "appendix", "timer")
    if para is not None and words(para).count("rounds") < len([f for f in found if (f.get("rounds") or 0) >= 2]):
        out.append("a timer check's disagreement is given without the spread of its rounds")
    return out


# --- 10. the CPU paper: parity against chance, the README's versions, a gain beside eager's ----------------------------------
def _above_chance(accuracy: float, rows: int, chance: float) -> bool:
    k = round(accuracy * rows)
    return bool(sstats.binomtest(k, rows, chance, alternative="greater").pvalue < 1 - stats.LEVEL)


def chance_and_words(paper) -> list[str]:
    """Parity's accuracy "passes" only where both accuracies are measurably above chance (the eval split's most
    frequent class; a one-sided binomial test); the study's README never prints an empty list or None for a
    version; a compiled regime's gain is quoted beside eager's on the same batches."""
    out = []
    parity, facts = paper.context.get("parity"), paper.context.get("facts") or {}
    t = table(paper.report, "parity")
    split = (facts.get("splits") or {}).get("eval") or {}
    counts = list((split.get("class_counts") or {}).values())
    if t is not None and parity is not None and counts:
        chance, rows = max(counts) / sum(counts), int(split["rows"])
        for r, cells in zip(parity.sort_values(["precision", "compile_mode"]).itertuples(), t.rows):
            learned = _above_chance(r.eager_accuracy, rows, chance) and _above_chance(r.compiled_accuracy, rows, chance)
            if cells[-1] == "pass" and not learned:
                out.append(f"parity of {r.compile_mode} ({r.precision}) passes at {r.compiled_accuracy:.0%}, chance {chance:.0%}")
    readme = paper.context.get("readme") or ""
    out += [f"the README prints {bad!r}" for bad in ("[]", " None,", " None;") if bad in readme]
    found = text(paper.report, "shapes", "findings")
    s = vocab.usable(paper.summary)
    for f in found.data["found"] if found else []:
        for c in f["top"] + f["below"] + f["few"]:
            e = s[(s.compile_mode == "eager") & (s.compile_scope == "module") & (s.shape_regime == c["regime"])
                  & (s.precision == c["precision"]) & (s.batch_size == c["batch"])]
            if c["regime"] != "static" and len(e) and numbers.finite(e.iloc[0].gain_over_eager_static):
                if numbers.interval(iv(e.iloc[0], "gain"), False) not in words(found):
                    out.append(f"{c['mode']} on {c['regime']} batches at batch {c['batch']}: its gain without eager's")
    return out


# --- readability: the abstract's length, its sentences, its terms defined where they first appear -----------------------------
TERMS = [(r"static-shape", r"padded to \d+ tokens"), (r"\(module\)", r"\(module\)[^.]*torch\.compile\(model\)"),
         (r"\(fused-adamw\)", r"fused AdamW"), (r"\(forward\)", r"forward graph"), (r"\(backward\)", r"backward graph"),
         (r"\(aot-eager\)", r"without Inductor"), (r"\(step\)", r"compiled as one function"),
         (r"\(step-graph\)", r"in one CUDA graph"), (r"\(graph-break\)", r"graph break"),
         (r"packed batches", r"packed into rows"), (r"bucketed[\w-]* batches", r"smallest of a few lengths"),
         (r"dynamic[\w-]* batches", r"longest row"), (r"real[ (]", r"non-pad"), (r"cold start", r"empty cache"),
         (r"\bepoch\b", r"a pass over"), (r"\bspeedup\b", r"[Aa] speedup is")]


def abstract_readable(paper) -> list[str]:
    """Every term the abstract uses (a scope, a shape regime, real tokens, a cold start, an epoch, the speedup)
    defined in or before the sentence it first appears in (the abstract's and the sentences' lengths are held on
    the stored papers by tests/test_readability.py)."""
    out, found = [], abstract_sentences(paper.markdown)
    for use, definition in TERMS:
        first = next((i for i, x in enumerate(found) if re.search(use, x)), None)
        if first is not None and not any(re.search(definition, x) for x in found[:first + 1]):
            out.append(f"the abstract uses {use!r} before defining it: {found[first][:100]}")
    return out


# --- round three (issue 68): the sentences a reader still trips on -----------------------------------------------------
NEGATED = re.compile(r"\bnot (?:not|no|never|none)\b")


def read_once(paper) -> list[str]:
    """No sentence negates a negation (the timer correction's "faster than eager, not not distinguishable from
    eager")."""
    return [f"a double negation: {s[:120]}" for s in sentences(plain(paper.markdown)) if NEGATED.search(s)]


GLOSSED = {"gpu wait": r"gpu wait.*wait for its turn on its GPU"}  # a part of the run time, defined where first used


def parts_defined(paper) -> list[str]:
    """A part of the runs' time whose name does not say what it is (gpu wait) is defined in the sentence that first
    names it, and in the caption of the figure that draws it."""
    md, out = plain(paper.markdown), []
    drawn = ((paper.context.get("drawn") or {}).get("overhead") or {}).get("parts") or []
    figure = next((b for x in paper.report.main for b in x.blocks if b.kind == "figure" and b.key == "overhead"), None)
    for name, gloss in GLOSSED.items():
        first = next((s for s in sentences(md) if name in s.lower()), None)
        if first is not None and not re.search(gloss, first, re.I):
            out.append(f"{name!r} first used undefined: {first[:120]}")
        if name in drawn and figure is not None and not re.search(gloss, words(figure.caption), re.I):
            out.append(f"the overhead figure draws {name!r} without defining it")
    return out


STEP_LABEL = re.compile(r"Step: ([^.]*)\.")


def _step_value(label: str) -> str | None:
    """The summary column a table's step label names: the median across processes, or the geometric mean."""
    return "step_ms" if "geometric mean" in label else "steady_step_ms" if "median" in label else None


def step_labels(paper) -> list[str]:
    """A table's "Step:" says what its step column holds: Table 1's median across processes, the payback table's
    value as its caption names it (the geometric mean with its interval)."""
    out, s = [], paper.summary
    keyed = {"modes": lambda r: {"mode": r[2], "scope": "module", "regime": "static", "precision": r[0], "batch": int(r[1])}}
    rule = text(paper.report, "payback", "rule")
    for key, at in (("modes", 3), ("payback", 3)):
        t = table(paper.report, key)
        m = STEP_LABEL.search(words(t.caption)) if t is not None else None
        if t is None or not t.rows:
            continue
        column = _step_value(m[1]) if m else None
        if column is None:
            out.append(f"table {key}: its step column's label names neither a median nor a geometric mean")
            continue
        named = [keyed[key](r) for r in t.rows] if key in keyed else rule.data["p"]["rows"]
        for r, c in zip(t.rows, named):
            row = row_of(s, c)
            cell = r[at].split(" ")[0]
            if row is not None and numbers.finite(row[column]) and re.match(r"[\d.,]+$", cell) and cell != numbers.ms(row[column]):
                out.append(f"table {key}: {c['mode']} ({c['scope']}) at batch {c['batch']}'s step {cell} is not its "
                           f"{column} {numbers.ms(row[column])}, as its label says")
    return out


WORD = re.compile(r"[\w.–×%→-]+")
HEDGES = {"can", "may", "up", "to", "only", "first", "more", "less", "than"}  # a claim's reach: never dropped


def _within(short: list[str], long: list[str]) -> bool:
    """Are the words of `short` those of `long`, in order, every hedge of `long` kept?"""
    rest = iter(long)
    return all(w in rest for w in short) and HEDGES & set(long) <= set(short)


def claims_as_claimed(paper) -> list[str]:
    """Each claim the prose gives a verdict ("Holds: ...") is quoted in its own words: those of its statement in the
    claims table, in order, with every hedge ("can", "up to", "first", "than") kept."""
    t, prose = table(paper.report, "claims"), part(paper.markdown, "Common claims, checked")
    if t is None or not prose:
        return []
    said = [WORD.findall(plain(r[0]).lower()) for r in t.rows]
    verdicts = [x for x in sentences(prose) if re.match(r"[A-Z][\w ]+: ", x) and not x.startswith("A verdict")]
    quoted = [q for x in verdicts for q in re.findall(r'"([^"]+)"', x)]
    out = [f"a claim not in its own words: {q!r}" for q in quoted if not any(_within(WORD.findall(q.lower()), w) for w in said)]
    return out + ([f"{len(t.rows)} claims, {len(quoted)} quoted with a verdict"] if len(quoted) != len(t.rows) else [])


INVARIANTS = {"recommendations separated": recommendations_separated, "trends hold": trends_hold,
              "evidence present": evidence_present, "timer corrections": timer_corrections,
              "chance and words": chance_and_words, "abstract readable": abstract_readable,
              "read once": read_once, "parts defined": parts_defined, "step labels": step_labels, "claims as claimed": claims_as_claimed}
