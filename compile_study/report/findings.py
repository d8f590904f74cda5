"""The sentences of the paper's main text: abstract, method, section texts, conclusions (report model).

Each function reads the summary (one row per configuration) and writes sentences whose every number is
formatted by numbers.py; each recommendation names the table it comes from. Selections go through
vocab.headline / vocab.usable. See report.py for the marks a sentence may carry.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pandas as pd

from compile_study.aggregate import numbers as n
from compile_study.core import vocab
from compile_study.report.document import plain


@dataclass
class Context:
    summary: pd.DataFrame
    claims: pd.DataFrame | None
    env: dict
    facts: dict
    config: dict
    device: str
    figures: str  # the figure directory, relative to the paper

    @property
    def head(self) -> pd.DataFrame:
        """Usable headline rows (static shapes, the module compiled)."""
        return vocab.usable(vocab.headline(self.summary))

    @property
    def precision(self) -> str | None:
        return main_precision(self.summary)

    @property
    def grids(self) -> list[dict]:
        return self.config["grids"][self.device]


def main_precision(summary: pd.DataFrame) -> str | None:
    """The precision the abstract speaks of: bf16 where measured (what one trains in), else the most measured."""
    h = vocab.usable(vocab.headline(summary))
    if h.empty:
        return None
    return "bf16" if "bf16" in set(h.precision) else h.precision.value_counts().index[0]


def modes_of(df: pd.DataFrame) -> list[str]:
    return sorted(set(df.compile_mode) - {"eager"}, key=vocab.COMPILE_MODES.index)


def _join(parts: list[str], last: str = "and") -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + f" {last} " + parts[-1]


def _value(v) -> str:
    return plain(", ".join(map(str, v)) if isinstance(v, list) else v)


# --- the head of the paper ------------------------------------------------------------------------------------
def byline(ctx: Context) -> str:
    env = ctx.env
    parts = [f"{'GPU' if ctx.device == 'cuda' else 'CPU'} run on {_value(env.get('device_name'))}",
             f"torch {_value(env.get('torch'))}"]
    parts += [f"{name} {_value(env[k])}" for k, name in (("triton", "triton"), ("cuda", "CUDA"))
              if env.get(k) not in (None, "None", [])]
    return " · ".join(parts + [f"data: {plain(ctx.facts['description'])}"])


def notices(ctx: Context) -> list[str]:
    out = []
    if ctx.device == "cpu":
        capped = [f"{plain(g['name'])} caps epochs at {g['max_epoch_steps']} steps" for g in ctx.grids
                  if g.get("max_epoch_steps")]
        out.append(f"These are CPU numbers (Inductor's C++ backend on {_value(ctx.env.get('cpu_cores'))} cores): "
                   "they say nothing about GPU speed." + (f" Sub-grid {_join(capped)}." if capped else ""))
    if ctx.facts.get("source") == "synthetic":
        out.append("The data is a synthetic stand-in, not AG News: accuracy figures say nothing about AG News.")
    warnings = [plain(w) for w in ctx.facts.get("warnings") or []]
    truncated = ctx.facts["splits"]["train"].get("truncated_fraction")
    if n.finite(truncated):
        warnings.append(f"{n.percent(truncated, 2)} of training rows are longer than {ctx.facts['max_len']} "
                        "tokens and truncated")
    if warnings:
        out.append("Data: " + "; ".join(warnings) + ".")
    return out


# --- sentences shared by the abstract and the sections ----------------------------------------------------------
def modes_sentence(ctx: Context) -> str:
    p = ctx.precision
    h = ctx.head[ctx.head.precision == p]
    parts = []
    for mode in modes_of(h):
        g = h[h.compile_mode == mode].sort_values("batch_size")
        ends = [g.iloc[0]] if len(g) == 1 else [g.iloc[0], g.iloc[-1]]
        parts.append(f"`{mode}` " + " and ".join(f"{n.row_interval(r)} at batch {int(r.batch_size)}" for r in ends))
    if not parts:
        return "No compiled configuration with static shapes produced a speedup."
    return (f"In {p} with static shapes, the compiled training step runs, relative to eager in the same process: "
            f"{'; '.join(parts)} (all batch sizes in ⟦tab:modes⟧).")


def verdict_sentence(ctx: Context) -> str:
    c = ctx.head[ctx.head.compile_mode != "eager"]
    counts = Counter(c.verdict)
    decided = {k: counts.pop(k, 0) for k in ("faster", "slower", "no measurable difference")}
    rest = sum(counts.values())
    text = (f"Against the A/A band of its cell, {decided['faster']} of {len(c)} compiled static-shape configurations "
            f"are measurably faster, {decided['slower']} slower and {decided['no measurable difference']} within noise")
    if rest:
        why = _join([f"{k.removesuffix(', no verdict')}: {v}" for k, v in sorted(counts.items())])
        text += f"; {rest} get no verdict ({why})"
    return text + "."


def precision_sentence(ctx: Context) -> str | None:
    h = ctx.head
    if h.precision.nunique() < 2:
        return None
    per = h.groupby("batch_size").precision.nunique()
    b = per[per == per.max()].index.max()
    parts = []
    for p, g in compiled(h[h.batch_size == b]).groupby("precision"):
        r = g.loc[g.steady_step_ms.idxmin()]
        parts.append(f"{p} {n.ms(r.steady_step_ms)} ms with `{r.compile_mode}`, {n.row_interval(r)} over eager")
    return f"By precision, the fastest compiled step at batch {int(b)} is " + "; ".join(parts) + "."


def compiled(df: pd.DataFrame) -> pd.DataFrame:
    return df[df.compile_mode != "eager"]


def shape_rows(ctx: Context) -> dict[int, pd.DataFrame]:
    """Per batch size where more than static shapes ran: its usable compiled module-scope rows."""
    s = vocab.usable(ctx.summary[ctx.summary.compile_scope == "module"])
    sizes = sorted(set(s[s.shape_regime != "static"].batch_size))
    return {int(b): compiled(s[s.batch_size == b]) for b in sizes}


def _gain(r) -> str:
    if r.shape_regime == "static" and not n.finite(r.gain_over_eager_static):
        return n.row_interval(r)  # static: its speedup is its gain over eager static
    return n.row_interval(r, "gain")


def shapes_sentence(ctx: Context) -> str | None:
    rows = shape_rows(ctx)
    if not rows:
        return None
    out = []
    for b, g in rows.items():
        g = g.assign(_g=g.gain_over_eager_static.fillna(g.speedup)).sort_values("_g", ascending=False)
        parts = [f"`{r.compile_mode}` {r.shape_regime} {_gain(r)}" for r in g.itertuples()]
        static = "" if (g.shape_regime == "static").any() else (
            f" No static compiled run at batch {b} is in this grid, so the static baseline there is eager's.")
        out.append(f"At batch {b}, real (non-pad) tokens/s relative to eager on statically padded batches: "
                   f"{'; '.join(parts)} (⟦tab:shapes⟧).{static}")
    return " ".join(out)


def payback_sentence(ctx: Context) -> str | None:
    h = compiled(ctx.head[ctx.head.precision == ctx.precision]).dropna(subset=["break_even_steps"])
    if h.empty:
        return None
    parts = []
    for mode in modes_of(h):
        g = h[h.compile_mode == mode]
        fin = g[g.break_even_steps.map(n.finite)]
        epochs = fin.break_even_steps / fin.batch_size.map(n.steps_per_epoch)
        text = (f"`{mode}` after {n.span(fin.break_even_steps, n.count)} steps "
                f"({n.span(epochs, lambda v: n.sig(v, 2))} epochs)" if len(fin) else f"`{mode}` never")
        never = len(g) - len(fin)
        parts.append(text + (f", never in {never} configuration(s) with no step saved" if never and len(fin) else ""))
    return (f"Cold compilation takes {n.span(h.cold_compile_s, n.seconds)} in {ctx.precision}; it pays for itself "
            f"{'; '.join(parts)}, counting epochs of the full 120,000-row AG News train split at each batch size "
            f"(⟦tab:modes⟧).")


def mfu_sentence(ctx: Context) -> str | None:
    ok = vocab.usable(ctx.summary).dropna(subset=["mfu"])
    ok = ok[ok.precision == ctx.precision]
    if ok.empty:
        return None
    r = ok.loc[ok.mfu.idxmax()]
    real = ("not recorded by these records" if not n.finite(r.get("real_mfu"))
            else n.percent(r["real_mfu"]))
    return (f"The best model FLOP utilisation in {ctx.precision} is {n.percent(r.mfu)} of the measured {n.sig(r.peak_tflops)} TFLOP/s "
            f"{r.precision} matmul peak ({r.compile_mode}, {r.shape_regime}, batch {int(r.batch_size)}: "
            f"{n.sig(r.achieved_tflops)} TFLOP/s); counting real (non-pad) tokens only, {real}.")


def claims_sentence(ctx: Context) -> str | None:
    c = ctx.claims
    if c is None or c.empty:
        return None
    names = c["topic"] if "topic" in c else c["claim"]
    groups: dict[str, list[str]] = {}
    for name, verdict in zip(names, c.verdict):
        key = plain(verdict.split(" (")[0])
        groups.setdefault(key, []).append(plain(name))
    parts = [f"{key}: {_join(v)}" for key, v in groups.items()]
    return f"Of {len(c)} common claims checked (⟦tab:claims⟧), " + "; ".join(parts) + "."


def abstract(ctx: Context) -> list[str]:
    model = ctx.config["model"]
    intro = (f"We time `torch.compile` against eager PyTorch on the training step of a {model['n_layers']}-layer "
             f"transformer text classifier (d_model {model['d_model']}) on {plain(ctx.facts['description'])}, on "
             f"{_value(ctx.env.get('device_name'))}, in {len(ctx.summary)} configurations "
             f"({ctx.env.get('n_records', 'their')} runs, one process each).")
    first = [intro, modes_sentence(ctx), precision_sentence(ctx), verdict_sentence(ctx)]
    second = [shapes_sentence(ctx), payback_sentence(ctx), mfu_sentence(ctx), claims_sentence(ctx)]
    return [" ".join(s for s in first if s), " ".join(s for s in second if s)]
