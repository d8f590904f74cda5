"""The paper's judgements of what compiling costs, and its figures (issue 51; the words: tests/judgement_invariants.py):
a break-even charges every second a user would pay, the method checks are worded by one rule, the dynamic-shapes
claim is judged by the rule, the figures draw what the text says. Each re-derives what it checks from the run and
compile records, the method checks' files and the summary with core/stats.py, not from the report's decisions.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from compile_study.aggregate.columns import WAYS, break_even_prefix, start_prefix
from compile_study.aggregate.estimate import at_once as at_once_model
from compile_study.core import stats, vocab
from compile_study.report import numbers
from compile_study.report.paper import sentences, words

from .paper_reading import abstract_sentences, plain, row_of, text


def _key(r) -> tuple:
    return (r.compile_mode, r.compile_scope, r.shape_regime, r.precision, int(r.batch_size))


# --- 2./4. a break-even charges every second a user would pay -------------------------------------------------------------
def _eager_overhead(runs: pd.DataFrame) -> dict:
    e = runs[(runs.compile_mode == "eager") & (runs.compile_scope == "module") & (runs.status == "ok")]
    return {k: (g.epoch1_s - g.epoch2_s).median()
            for k, g in e.groupby(["reference_regime", "precision", "batch_size"])}


def _mean_at_once(compiles: pd.DataFrame) -> list[float]:
    """Each compile record's time-weighted count of the compiles (itself included) that held a slot while it held
    its own, from the windows the records keep; the most it saw at once where they keep none."""
    held = [h if isinstance(h, list | tuple) else None for h in (compiles["held"] if "held" in compiles else
                                                                  [None] * len(compiles))]
    spans = np.array([h for h in held if h is not None], float).reshape(-1, 2)
    out = []
    for h, most in zip(held, pd.to_numeric(compiles.at_once)):
        if h is None:
            out.append(float(most))
            continue
        inside = np.clip(np.minimum(spans[:, 1], h[1]) - np.maximum(spans[:, 0], h[0]), 0, None).sum()
        out.append(float(inside / (h[1] - h[0])) if h[1] > h[0] else 1.0)
    return out


def _cold_seconds(paper) -> dict:
    """CONFIG key (mode, scope, regime, precision, batch) -> (seconds, at_once: each compile's time-weighted k,
    alone, cache, from the phase)."""
    runs, compiles = paper.context["runs"], paper.context.get("compiles")
    eager = _eager_overhead(runs)
    out = {}
    cold = runs[(runs.status == "ok") & (runs.compile_mode != "eager")
                & runs.inductor_cache.isin(("cold", vocab.SEARCH_SHARED))]
    sources = [(cold.assign(k=np.nan, alone=False), False)]
    if compiles is not None and len(compiles):
        every = compiles.assign(k=_mean_at_once(compiles))
        ok = every[(every.status == "ok") & (every.compile_mode != "eager") & (every.start == "cold")]
        sources.append((ok.assign(reference_regime=[vocab.Regime.parse(r).reference for r in ok.shape_regime]), True))
    for frame, phase in sources:
        for k, g in frame.groupby(["compile_mode", "compile_scope", "shape_regime", "precision", "batch_size"]):
            cell = (g.reference_regime.iloc[0], k[3], k[4])
            if cell in eager:
                out[k] = ([float(v) - eager[cell] for v in g.epoch1_s - g.epoch2_s], list(g.k),
                          list(g.alone.astype(bool)), list(g.inductor_cache), phase)
    return out


def _geo(values) -> float:
    v = np.asarray([x for x in values if x and x > 0], float)
    return float(np.exp(np.log(v).mean())) if len(v) else math.nan


KEPT = Path(__file__).resolve().parents[1] / "benchmarks" / "compile-at-once"


def _check_factor(check: dict) -> tuple[float, float, int]:
    """A compile-concurrency check's (point, low end, k): today's shape a Welch t ratio of the phase's compiles over
    the alone ones, a stored study's the t interval of its rounds' ratios."""
    if "phase" in check:
        iv = stats.ratio_interval([p["cold_compile_s"] for p in check["phase"]], [a["cold_compile_s"] for a in check["alone"]])
    else:
        iv = stats.speedup_interval([r["ratio"] for r in check["results"]])
    return iv.point, iv.low, int(check["k"])


def _factor(paper) -> tuple[float, int] | None:
    """The factor compiles among others are divided by and its k: the study's check where its interval excludes 1,
    else the kept check nearest its k whose interval does; None where neither."""
    own = (paper.context.get("checks") or {}).get("compile_concurrency") or {}
    if own.get("applicable"):
        point, low, k = _check_factor(own)
        if low > 1:
            return point, k
    kept = [json.loads(p.read_text()) for p in sorted(KEPT.glob("*.json"))]
    kept = [_check_factor(c) for c in kept if c.get("applicable") and c.get("device") == paper.spec.device]
    kept = sorted((abs(k - int(own.get("k") or 8)), k, point) for point, low, k in kept if low > 1)
    return (kept[0][2], kept[0][1]) if kept else None


def expected_cold_start(paper) -> dict:
    """Per configuration, the seconds a user alone pays from an empty cache, re-derived: its own cold compiles,
    each divided by the factor's slowdown at the number that ran at once with it (time-weighted; a line from 1
    alone to the factor at its k), plus the whole cold compile of the max-autotune mode whose GEMM search it
    started from."""
    factor = _factor(paper)
    seconds = _cold_seconds(paper)
    out = {}
    for k, (own, at_once, alone, caches, phase) in seconds.items():
        ks = [1.0 if a else x for x, a in zip(at_once, alone)]
        if phase and factor and any(x > 1 for x in ks):
            ratio, ref = factor
            own = [v / (1 + (ratio - 1) * ((x - 1) / (ref - 1) if x <= ref else
                                           (at_once_model.slowdown(x) - 1) / (at_once_model.slowdown(ref) - 1)))
                   for v, x in zip(own, ks)]
        cost = _geo(own)
        if vocab.SEARCH_SHARED in caches:
            searched = [m for m in vocab.AUTOTUNE_MODES if m != k[0] and (m, *k[1:]) in seconds
                        and set(seconds[(m, *k[1:])][3]) == {"cold"}]
            cost = cost + _geo(seconds[(searched[0], *k[1:])][0]) if searched else math.nan
        out[k] = cost
    return out


def expected_portable_start(paper) -> dict:
    """Per configuration, the seconds a job shipped with the first cold compile's artifacts pays, re-derived: its
    portable starts' load and epoch 1 minus epoch 2, less eager's in the cell, as timed (they ran among others)."""
    compiles = paper.context.get("compiles")
    if compiles is None or not len(compiles):
        return {}
    eager = _eager_overhead(paper.context["runs"])
    ok = compiles[(compiles.status == "ok") & (compiles.start == "portable")]
    out = {}
    for k, g in ok.groupby(["compile_mode", "compile_scope", "shape_regime", "precision", "batch_size"]):
        cell = (vocab.Regime.parse(k[2]).reference, k[3], k[4])
        if cell in eager:
            load = pd.to_numeric(g.artifacts_load_s).fillna(0.0)
            out[k] = _geo([float(v) - eager[cell] for v in load + g.epoch1_s - g.epoch2_s])
    return out


def break_evens_charged(paper) -> list[str]:
    """Each configuration's cold start is what a user alone pays (expected_cold_start), its break-even that cost
    over the time a step saves, and its warm break-even the warm-cache load over the same; the payback rule says how
    compiles that ran at once were charged."""
    if "runs" not in paper.context:
        return []
    out, expected, shipped = [], expected_cold_start(paper), expected_portable_start(paper)
    s = vocab.usable(paper.summary[paper.summary.compile_mode != "eager"])
    wanted = ["compile_mode", "compile_scope", "shape_regime", "precision", "batch_size", "cold_start_s", "reference_step_ms",
              "speedup", "payback"] + [c for w in WAYS for c in (f"{start_prefix(w)}_s", f"{break_even_prefix(w)}_steps")]
    for r in s[[c for c in dict.fromkeys(wanted) if c in s]].itertuples():
        want, got = expected.get(_key(r), math.nan), getattr(r, "cold_start_s", math.nan)
        if math.isfinite(want) != math.isfinite(got) or math.isfinite(want) and not math.isclose(want, got, rel_tol=1e-6):
            out.append(f"{r.compile_mode} ({r.compile_scope}) at batch {r.batch_size}: cold start {got} s, "
                       f"a user alone pays {want} s")
        want, got = shipped.get(_key(r), math.nan), getattr(r, "portable_start_s", math.nan)
        if math.isfinite(want) != math.isfinite(got) or math.isfinite(want) and not math.isclose(want, got, rel_tol=1e-6):
            out.append(f"{r.compile_mode} ({r.compile_scope}) at batch {r.batch_size}: portable start {got} s, "
                       f"its loads and first epoch {want} s")
        saved = r.reference_step_ms * (1 - 1 / r.speedup) / 1e3
        for way in WAYS:
            cost, steps = getattr(r, f"{start_prefix(way)}_s", math.nan), getattr(r, f"{break_even_prefix(way)}_steps", math.nan)
            if r.payback == "pays-after" and saved > 0 and math.isfinite(cost) and not math.isclose(steps, cost / saved,
                                                                                                    rel_tol=1e-6):
                out.append(f"{r.compile_mode} ({r.compile_scope}) at batch {r.batch_size}: {way} break-even {steps} is "
                           f"not its cost over the time a step saves")
    compiles = paper.context.get("compiles")
    rule = text(paper.report, "payback", "rule")
    if rule is not None and compiles is not None and len(compiles) and (pd.to_numeric(compiles.at_once) > 1).any():
        said = words(rule)
        if not re.search(r"divided by the slowdown at the number that ran with it|as timed", said):
            out.append("the payback rule does not say how compiles that ran at once were charged")
    return out


# --- 4. one word rule for the method checks -------------------------------------------------------------------------------
def _check_rule(i: stats.Interval, low: float, high: float) -> str:
    if i.n < stats.MIN_N or not math.isfinite(i.low):
        return "few-runs"
    if i.low > high:
        return "faster"
    if i.high < low:
        return "slower"
    if low <= i.low and i.high <= high:
        return "within-noise"
    return "underpowered" if i.low < low and i.high > high else "indistinct"


def checks_by_one_rule(paper) -> list[str]:
    """Every method check read against its band (the launcher's and the concurrency check's: their cell's A/A
    band; the compile-concurrency check's: 1) by one rule: an interval wider than the band on both sides is
    "underpowered", never "not distinguishable"."""
    out = []
    decided = (paper.context.get("decisions") or {}).get("checks") or {}
    for name in ("launcher", "concurrency", "compile_concurrency"):
        d = decided.get(name)
        if not d:
            continue
        band = [1.0, 1.0] if name == "compile_concurrency" else d.get("band")
        if band is None:
            continue
        want = _check_rule(numbers.decided_interval(d["interval"]), *band)
        if d["verdict"] != want:
            out.append(f"the {name} check reads {d['verdict']}, its rule {want}")
    if "not distinguishable from its time alone" in plain(paper.markdown):
        out.append("the compile-concurrency check is called not distinguishable where the rule says underpowered")
    return out


# --- 5. dynamic shapes judged by the rule; the break-even figure plots what pays ---------------------------------------------
ERASED = ("within-noise", "indistinct", "slower")


def dynamic_by_rule(paper) -> list[str]:
    """"Dynamic shapes erase the gain" holds where every dynamic configuration with a verdict is no gain over eager
    by the rule (within noise, not distinguishable, slower), does not hold where every one is faster; and the
    break-even figure draws only configurations that pay back."""
    out = []
    s = vocab.usable(paper.summary[(paper.summary.compile_mode != "eager") & (paper.summary.compile_scope == "module")])
    dyn = s[pd.Series([vocab.Regime.parse(x).is_dynamic for x in s.shape_regime], index=s.index, dtype=bool)]
    codes = {"holds" if v in ERASED else "fails" for v, n in zip(dyn.verdict, dyn.speedup_n)
             if n >= stats.MIN_N and v in ERASED + ("faster",)}
    want = ("not-measured" if dyn.empty else "depends" if len(codes) == 2 else "holds" if codes == {"holds"} else
            "does-not-hold" if codes == {"fails"} else "not-enough-evidence")
    groups = text(paper.report, "claims", "groups")
    got = next((v for v, ids in groups.data["c"]["by"].items() if "dynamic" in ids), None) if groups else None
    if groups and got != want:
        out.append(f"dynamic shapes erase the gain: the paper says {got}, the rule {want}")
    for c in (paper.context.get("drawn") or {}).get("breakeven", {}).get("configs", []):
        r = row_of(paper.summary, c)
        if r is None or r.payback != "pays-after":
            out.append(f"the break-even figure plots {c['mode']} ({c['scope']}) on {c['regime']} batches at batch "
                       f"{c['batch']}, which does not pay back")
    return out


# --- 9. figures: what they draw and what their captions say ----------------------------------------------------------------
def figures_honest(paper) -> list[str]:
    """The break-even figure draws every recommended configuration that pays back (step-graph included) and nothing
    else, on log axes where values span more than 10x; the timeline's caption says the cache its runs started
    from; the roofline draws both ends of the text's MFU range; a CPU study's overhead figure has no GPU bar."""
    out, drawn = [], paper.context.get("drawn") or {}
    be = drawn.get("breakeven")
    rule = text(paper.report, "payback", "rule")
    if rule is not None:
        for c in rule.data["p"]["rows"]:
            k = {x: c[x] for x in ("mode", "scope", "regime", "precision", "batch")}
            if c["recommended"] and c["code"] == "pays-after" and (not be or k not in be["configs"]):
                out.append(f"the break-even figure leaves out the recommended {c['mode']} ({c['scope']}) at batch {c['batch']}")
    if be:
        rows = [row_of(paper.summary, c) for c in be["configs"]]
        for axis, cols in (("log_x", [f"{start_prefix(w)}_s" for w in be["ways"]]),
                           ("log_y", [f"{break_even_prefix(w)}_steps" for w in be["ways"]])):
            v = pd.to_numeric(pd.Series([getattr(r, c) for r in rows if r is not None for c in cols]), errors="coerce")
            v = v[np.isfinite(v) & (v > 0)]
            if len(v) and be[axis] != bool(v.max() > 10 * v.min()):
                out.append(f"the break-even figure's {axis} is {be[axis]} for values spanning {v.max() / v.min():.1f}x")
    tl = drawn.get("timeline")
    said = [x for x in sentences(plain(paper.markdown)) if re.search(r"first epoch|[Ee]poch 1\b", x)]
    if tl and tl["cache"] == ["warm"] and any(re.search(r"compilations? included", x) for x in said):
        out.append("the timeline's runs started from a warm cache and its words say compilations are included")
    mfu = text(paper.report, "modes", "mfu")
    if mfu is not None and "roofline" in drawn:
        for end in ("low", "high"):
            c = {x: mfu.data["m"][end][x] for x in ("mode", "scope", "regime", "precision", "batch")}
            if c not in drawn["roofline"].get("configs", []):
                out.append(f"the roofline leaves out {c['mode']} ({c['scope']}), the {end} end of the MFU range")
    if paper.spec.device == "cpu":
        out += [f"a CPU study's overhead figure has a bar '{p}'" for p in drawn.get("overhead", {}).get("parts", [])
                if "gpu" in p.lower() or "CUDA" in p]
    return out


# --- round three (issue 68): the abstract's cold start against an epoch, by every configuration's interval -----------
def _epoch_codes(summary: pd.DataFrame) -> list[str]:
    """Each configuration of the payback table (compiled, static, the scopes one trains with, every precision) with a
    break-even interval: "more" (its interval above an epoch, or it never pays back), "less" or "straddles"."""
    s = vocab.usable(summary[(summary.compile_mode != "eager") & (summary.shape_regime == "static")
                             & summary.compile_scope.isin(vocab.TRAINING_SCOPES)])
    s = s[s.payback.notna()] if "payback" in s else s.iloc[:0]
    out = []
    for r in s[["payback", "break_even_low", "break_even_high", "break_even_n", "full_epoch_steps"]].itertuples():
        if r.payback == "never":
            out.append("more")
        elif r.break_even_n >= stats.MIN_N and math.isfinite(r.break_even_low):
            epoch = r.full_epoch_steps
            out.append("more" if r.break_even_low > epoch else "less" if r.break_even_high < epoch else "straddles")
    return out


EVERY_MORE = re.compile(r"Wherever measured in \w+ or more processes, a cold start .* takes more than an epoch")
EVERY_LESS = re.compile(r"a cold start .* is earned back within one epoch")
SOME = re.compile(r"A cold start .* takes more than an epoch .* to earn back in (\w+) of the (\w+) configurations with "
                  r"an interval(?:, less in (\w+))?\.")


def _count(word: str | None) -> int:
    return 0 if word in (None, "none") else numbers.WORDS.index(word) if word in numbers.WORDS else int(word)


def cold_start_epochs(paper) -> list[str]:
    """The abstract says a cold start takes more than an epoch to earn back (or less) "wherever measured" only where
    every configuration's break-even interval lies wholly on that side of an epoch (a configuration that never pays
    back: above); otherwise it counts them, and its counts are the intervals'."""
    codes = _epoch_codes(paper.summary)
    abstract = " ".join(abstract_sentences(paper.markdown))
    out = []
    if EVERY_MORE.search(abstract) and set(codes) != {"more"}:
        out.append(f"the abstract says every cold start takes more than an epoch to earn back: {sorted(codes)}")
    if EVERY_LESS.search(abstract) and set(codes) != {"less"}:
        out.append(f"the abstract says every cold start is earned back within an epoch: {sorted(codes)}")
    m = SOME.search(abstract)
    said = [_count(m[i]) for i in (1, 2, 3)] if m else None
    if m and said != [codes.count("more"), len(codes), codes.count("less")]:
        out.append(f"the abstract counts {said} cold starts against an epoch, the intervals {sorted(codes)}")
    return out


INVARIANTS = {"break-evens charged": break_evens_charged, "checks by one rule": checks_by_one_rule,
              "dynamic by the rule": dynamic_by_rule, "figures honest": figures_honest,
              "cold start epochs": cold_start_epochs}
