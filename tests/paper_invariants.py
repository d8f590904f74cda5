"""What every paper must keep, checked on its report model and its Markdown: each checker returns the violations
it finds (empty: the invariant holds). tests/test_invariants.py runs them on generated studies and shows each
one failing on a hand-made study that breaks it.

    problems = paper_invariants.check(paper)   # paper: generated_studies.Paper (summary, report, markdown)

The checkers re-derive what they check from summary.csv's intervals with core/stats.py, independently of the
report's own rankings (aggregate/decide.py), so that a wrong decision there is caught too.
"""

from __future__ import annotations

import re

from compile_study.core import stats, vocab
from compile_study.report import numbers
from compile_study.report.paper import sentences

from . import cost_invariants as costs
from . import judgement_invariants as judged
from .paper_reading import plain, tables, texts

# words that compare measured configurations (with eager or with each other)
COMPARATIVE = re.compile(r"faster than|slower than|fastest|the most\b|more than any|not distinguishable|measurably|"
                         r"the shorter one|gains more|gain more")
FEWER = re.compile(r"\(single run\)|n = [12], no interval")  # an interval's method where it has fewer than MIN_N
GPU_WORDS = ("TF32", "CUDA", "Triton", "GPU wait", "gpu wait", "driver")  # never in a CPU study's paper
BUILT_IN_WORDS = ("masked mean pooling", "d_model", "-layer transformer", "feed-forward 1024",
                  "transformer encoder classifier", "small transformer", "transformer text classifier",
                  "matmul FLOPs", "matmul TFLOP/s")
TRANSFORMER = re.compile(r"\btransformer\b(?!s)")  # the built-in model's kind: a plugged model's paper never says it
KEY_HEADERS = {"precision", "batch", "mode", "shapes", "what runs", "what is compiled", "sub-grid", "claim", "#",
               "scope", "kernel", "operator", "start"}
MEASURED = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)(?=(?:×| ?%| s\b| ms\b| steps\b| epochs\b| TFLOP/s))")
THRESHOLD = re.compile(r"`([\w-]+)` \(([\w-]+)\) at batch (\d+)(?: in \w+)? pays after ([\d,]+) steps")
NAMED = re.compile(r"`([\w-]+)` \(([\w-]+)\)(?: on ([\w-]+) batches)? at batch (\d+)")


def _rankings(value, prefix=None):
    """(ranking, quantity) for every ranking in a Text's data: a dict with top, below and few."""
    if isinstance(value, dict):
        if {"top", "below", "few"} <= set(value):
            yield value, prefix
        for k, v in value.items():
            yield from _rankings(v, {"batches": "speedup", "found": "gain", "shape": "gain"}.get(k, prefix))
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _rankings(v, prefix)


def _configs(value):
    """Every configuration dict in a Text's data (it has mode, batch and a speedup interval)."""
    if isinstance(value, dict):
        if {"mode", "batch", "speedup"} <= set(value) and isinstance(value["speedup"], stats.Interval):
            yield value
        for v in value.values():
            yield from _configs(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _configs(v)


def comparative_words(paper) -> list[str]:
    """Every ranking and verdict the paper words follows the interval rule, and none rests on fewer than MIN_N
    processes: re-derived with stats.compare from the intervals; and no sentence with a comparative word quotes
    an interval of fewer processes."""
    out = []
    for t in texts(paper.report):
        for r, q in _rankings(t.data):
            where = f"{t.file}.{t.macro}"
            ranked = r["top"] + r["below"]
            if any(c[q].n < stats.MIN_N for c in ranked) or any(c[q].n >= stats.MIN_N for c in r["few"]):
                out.append(f"{where}: a configuration of fewer than {stats.MIN_N} processes is ranked")
            if r["top"]:  # the group: one chain of overlapping intervals, each configuration below under all of it
                if not judged.one_chain([c[q] for c in r["top"]]):
                    out.append(f"{where}: the top is not one chain of overlapping intervals")
                out += [f"{where}: {b['mode']} ({b['scope']}) is called below {c['mode']} ({c['scope']}) but overlaps it"
                        for c in r["top"] for b in r["below"] if stats.compare(c[q], b[q]) != "higher"]
            for a in r.get("apart", []):
                out += [f"{where}: {h['mode']} is called above {a['lower']['mode']} without separate intervals"
                        for h in a["above"] if stats.compare(h[q], a["lower"][q]) != "higher"]
        for c in _configs(t.data):
            if c.get("verdict") in ("faster", "slower", "within-noise", "indistinct") and c["speedup"].n < stats.MIN_N:
                out.append(f"{t.file}.{t.macro}: a verdict for {c['mode']} at batch {c['batch']} with n < {stats.MIN_N}")
        for p in t.data.get("pairs", []) if isinstance(t.data.get("pairs"), list) else []:
            if p.get("code") != stats.compare(p["slow"]["step"], p["fast"]["step"]):
                out.append(f"{t.file}.{t.macro}: the precisions' step times compared against the rule")
    out += [f"a comparative sentence quotes fewer processes: {s[:120]}"
            for s in sentences(paper.markdown.partition("\n## Appendix")[0]) if COMPARATIVE.search(s) and FEWER.search(s)]
    return out


def recommendations(paper) -> list[str]:
    """Every run-length recommendation's threshold is the break-even of the configuration it names (summary.csv),
    that configuration is faster than eager, and no sentence tells every shorter run to stay eager."""
    s, out = paper.summary, []
    static = s[s.shape_regime == "static"]
    for m in THRESHOLD.finditer(paper.markdown):
        mode, scope, batch, steps = m[1], m[2], int(m[3]), m[4]
        rows = static[(static.compile_mode == mode) & (static.compile_scope == scope) & (static.batch_size == batch)]
        if not any(numbers.steps(r.break_even_steps) == steps and r.verdict == "faster" for r in rows.itertuples()):
            out.append(f"{mode} ({scope}) at batch {batch}: 'pays after {steps} steps' is not its break-even")
    for sentence in sentences(paper.markdown):
        if re.search(r"sooner eager", sentence) and "with that configuration" not in sentence:
            out.append(f"a shorter-run advice not tied to its configuration: {sentence[:120]}")
        if re.search(r"sooner eager", sentence) and not re.search(r"filled cache", sentence):
            out.append(f"a shorter-run advice that forgets a filled cache's warm-cache load: {sentence[:120]}")
        if re.search(r"longest break-even|shortest break-even", sentence):
            out.append(f"advice from an extreme over configurations: {sentence[:120]}")
    return out


def _table_text(report) -> str:
    return "\n".join(" | ".join(row) for t in tables(report) for row in t.rows)


def numbers_traced(paper) -> list[str]:
    """Every measured number (a ratio, a percentage, seconds, steps, epochs) in the abstract and the conclusions
    appears, with the same rounding, in a table."""
    md = paper.markdown.replace("\\", "")  # Markdown's escapes undone
    abstract = md.partition("\n## Abstract\n")[2].partition("\n## ")[0]
    conclusions = md.partition("\n## Conclusions and recommendations\n")[2].partition("\n## ")[0]
    cells = _table_text(paper.report).replace("\\", "")
    level = f"{stats.LEVEL:.0%} t"  # the intervals' level, a rule of the method and not a measured number
    abstract, conclusions = abstract.replace(level, ""), conclusions.replace(level, "")
    found = set(re.findall(r"(?<![\w.])\d[\d,]*(?:\.\d+)?", cells))
    return [f"{n} (in the {part}) is in no table" for part, text in (("abstract", abstract), ("conclusions", conclusions))
            for n in MEASURED.findall(text) if n not in found]


def tables_and_names(paper) -> list[str]:
    """Every configuration a sentence names is a row of some table, and every table's rows are unique by their
    identifying columns (precision included)."""
    out, rows = [], []
    for t in tables(paper.report):
        keys = [i for i, c in enumerate(t.columns) if c.header in KEY_HEADERS]
        seen = [tuple(r[i] for i in keys) for r in t.rows]
        out += [f"table {t.key}: two rows read {k}" for k in {k for k in seen if seen.count(k) > 1}]
        rows += [set(r) for r in t.rows]
    for m in NAMED.finditer(paper.markdown):
        mode, scope, batch = m[1], m[2], m[4]
        label = f"{mode} ({scope})"
        # a table row names it as "mode (scope)", by its mode and scope cells, or (the scopes table, default mode
        # only) by its scope
        if not any(batch in r and (label in r or mode in r and (scope == "module" or scope in r)
                                   or mode == "default" and scope in r) for r in rows):
            out.append(f"'{m[0]}' names a configuration no table holds")
    return out


def device_and_model(paper) -> list[str]:
    """A CPU study's paper has no GPU-only words; a plugged model's paper no built-in model's words, and it
    states the plug's parameters (and, where its config says them, its layers and width)."""
    md, out = paper.markdown, []
    if paper.spec.device == "cpu":
        out += [f"a CPU paper says {w!r}" for w in GPU_WORDS if w in md]
    if paper.spec.plug:
        out += [f"a plugged model's paper says {w!r}" for w in BUILT_IN_WORDS if w in md]
        out += ["a plugged model's paper says 'transformer'" for _ in TRANSFORMER.findall(md)[:1]]
        params = paper.summary.model_params.dropna()
        if len(params) and f"{int(params.iloc[0]):,} parameters" not in md:
            out.append("a plugged model's paper does not state its parameters")
        hf = (paper.context["config"]["model"].get("hf_config") or {})
        if hf and f"{hf['num_hidden_layers']} layers of width {hf['hidden_size']}" not in md:
            out.append("a transformers plug's paper does not state its layers and width")
    return out


SPLIT = re.compile(r"Of `([\w-]+)` \(step-graph\)'s ([\d.,]+)× .*? at batch (\d+), ([\d.,]+)× .*? is the CUDA graph's "
                   r"and ([\d.,]+)× .*? the compiler's\.")
UNSPLIT = re.compile(r"The CUDA graph's and the compiler's shares of (.*?) are not yet measured")


def graph_split(paper) -> list[str]:
    """The step graph's speedup is split into the CUDA graph's share and the compiler's exactly where the study
    measured both the step graph and its eager control (eager-step-graph) at a static cell of the main precision,
    and said not yet measured wherever it measured the step graph alone; the graph's share is the control's own
    speedup, the compiler's is re-derived from the two configurations' per-process speedups (stats.ratio_interval),
    and the two multiply back to the step graph's speedup to the digits shown."""
    s, out = paper.summary, []
    md = plain(paper.markdown)
    said = {(m[1], int(m[3])): m for m in SPLIT.finditer(md)}
    unsaid = " ".join(m[1] for m in UNSPLIT.finditer(md))
    main = judged._main_precision(s)
    static = vocab.usable(s[(s.shape_regime == "static") & (s.precision == main)])
    runs = paper.context["runs"]
    runs = runs[(runs.status == "ok") & (runs.shape_regime == "static") & (runs.precision == main)]
    for r in static[(static.compile_scope == "step-graph") & (static.compile_mode != "eager")].itertuples():
        if not numbers.finite(r.speedup):
            continue
        c = static[(static.compile_scope == "eager-step-graph") & (static.batch_size == r.batch_size)]
        label = f"{r.compile_mode} (step-graph) at batch {r.batch_size}"
        m = said.pop((r.compile_mode, int(r.batch_size)), None)
        if c.empty or not numbers.finite(c.speedup.iloc[0]):
            out += [f"{label}: split without its control"] if m else []
            out += [] if f"`{r.compile_mode}` (step-graph) at batch {r.batch_size}" in unsaid else [
                f"{label}: measured without its control, and the paper does not say the split is not yet measured"]
            continue
        if m is None:
            out.append(f"{label}: both it and its control were measured, and the paper does not split its speedup")
            continue
        mine = runs[(runs.compile_scope == "step-graph") & (runs.compile_mode == r.compile_mode)
                    & (runs.batch_size == r.batch_size)].in_process_speedup
        control = runs[(runs.compile_scope == "eager-step-graph") & (runs.batch_size == r.batch_size)].in_process_speedup
        total, graph, compiler = (float(v.replace(",", "")) for v in (m[2], m[4], m[5]))
        h = 0.005  # each shown to two decimals
        derived = stats.ratio_interval(mine, control).point  # from the records; the paper's, from summary.csv's digits
        if (f"{m[2]}×", f"{m[4]}×") != (numbers.times(r.speedup), numbers.times(c.speedup.iloc[0])) \
                or abs(compiler - derived) > h + 1e-3 * derived:
            out.append(f"{label}: the split reads {m[2]}, {m[4]}, {m[5]}; the records give {numbers.times(r.speedup)}, "
                       f"{numbers.times(c.speedup.iloc[0])}, {numbers.times(derived)}")
        if not ((graph - h) * (compiler - h) <= total + h and (graph + h) * (compiler + h) >= total - h):
            out.append(f"{label}: {m[4]}× × {m[5]}× is not its {m[2]}×")
    return out + [f"{k[0]} (step-graph) at batch {k[1]}: a split of no measured step graph" for k in said]


INVARIANTS = {"comparative words": comparative_words, "recommendations": recommendations,
              "numbers traced": numbers_traced, "tables and names": tables_and_names,
              "device and model": device_and_model, "graph split": graph_split} | judged.INVARIANTS | costs.INVARIANTS


def check(paper) -> dict[str, list[str]]:
    """Every invariant's violations, by name (only those with some)."""
    found = {name: f(paper) for name, f in INVARIANTS.items()}
    return {name: v for name, v in found.items() if v}

