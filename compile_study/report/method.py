"""The method section's sentences (report model): model, data, grid, timing, intervals, where the time went.

Every grid fact (modes, batch sizes, regimes, repeats) is read from the study's config; every definition
is the one summary.py and stats.py implement.
"""

from __future__ import annotations

from compile_study.aggregate import numbers as n
from compile_study.report.document import Items, Para, plain
from compile_study.report.findings import Context, _join


def model_and_data(ctx: Context) -> str:
    m, f = ctx.config["model"], ctx.facts
    pct = f["splits"]["train"]["token_length_percentiles"]
    return (f"The model is a transformer encoder classifier ({m['n_layers']} layers, {m['n_heads']} heads, d_model "
            f"{m['d_model']}, feed-forward {m['d_ff']}, dropout {m['dropout']}, max length {m['max_len']}, a "
            f"{f['vocab_size']:,}-token WordPiece vocabulary) with masked mean pooling, cross-entropy loss and AdamW "
            f"(lr {ctx.config['train']['lr']}). Data: {plain(f['description'])}; subword lengths p50 "
            f"{n.count(pct['p50'])}, p90 {n.count(pct['p90'])}, p99 {n.count(pct['p99'])}, max {n.count(pct['max'])}, "
            f"so padding every row to {f['max_len']} makes {n.percent(f['splits']['train']['pad_fraction_at_max_len'])} "
            "of a static batch padding.")


def grid_items(ctx: Context) -> list[str]:
    out = []
    for g in ctx.grids:
        scopes = g.get("compile_scope") or ["module"]
        out.append(f"{plain(g['name'])}: modes {_join(list(map(str, g['compile_mode'])))}; "
                   + (f"scopes {_join(scopes)}; " if scopes != ["module"] else "")
                   + f"batch sizes {_join([str(b) for b in g['batch_size']])}; shapes {_join(g['shape_regime'])}; "
                   f"{_join(g['precision'])}; {g['repeats']} process(es) per configuration; {g['warmup_steps']} "
                   f"warm-up and {g['timed_steps']} timed steps in chunks of {g['interleave_chunk']}")
    return out


def timing(ctx: Context) -> str:
    sync = "CUDA events, one synchronisation per chunk" if ctx.device == "cuda" else "synchronous wall clock"
    return ("Each configuration and repeat runs in its own process: epoch 1 (compilation happens in its first steps), "
            "epoch 2, then a steady-state block in which the measured model and an eager reference model, trained on "
            f"the same batches, alternate in chunks of steps, each step timed ({sync}). The speedup of a process is "
            "the eager reference's median step over the measured model's.")


def intervals(ctx: Context) -> str:
    band = ctx.summary.aa_method.dropna()
    band = plain(band.iloc[0]).split(", n =")[0] if len(band) else "the eager runs' spread"
    return ("Across the processes of a configuration, the speedup is given with its interval and how it was made: "
            "with three or more processes a 95% Student-t interval on the log ratio (95% t, n = …); with two, "
            "their range (n = 2, range), which claims no coverage; with one, no interval (single run). The A/A band "
            f"of a cell comes from its eager-vs-eager runs ({band}); a configuration is faster or slower only when its "
            "whole 95% interval lies outside that band, and gets no verdict with fewer than three processes.")


def costs(ctx: Context) -> str:
    peaks = ctx.env.get("peak_tflops") or {}
    peak = _join([f"{p} {n.sig(v)}" for p, v in peaks.items()]) + " TFLOP/s" if peaks else "not measured"
    memory = "peak allocated device memory" if ctx.device == "cuda" else "peak resident set size"
    return ("Compile latency is epoch 1 minus epoch 2 of the compiled run, less the same for eager, with an empty "
            "Inductor cache (cold, repeat 0) or a reused one (warm). Break-even is cold compile latency over the time "
            "a step saves, in steps and in epochs of the full 120,000-row AG News train split at that batch size. "
            f"Memory ratio compares {memory}. MFU is matmul FLOPs per step (padding included; real-token MFU counts "
            f"only non-pad tokens) over step time and the device's measured matmul peak ({peak}).")


def where_time_went(ctx: Context) -> str:
    totals = {k: v for k, v in (ctx.env.get("overhead_s") or {}).items() if n.finite(v)}
    total = totals.pop("total_s", sum(totals.values()))
    if not totals or not total:
        return ("Where the study's own time went (start-up, compilation, timed blocks, evidence) is not recorded by "
                "these records: their schema predates the per-run overhead breakdown.")
    share = sorted(totals.items(), key=lambda kv: -kv[1])
    parts = [f"{k.removesuffix('_s').replace('_', ' ')} {n.percent(v / total, 2)}" for k, v in share if v > 0]
    return (f"The study's runs took {n.sig(total / 60)} min of wall time in all: {'; '.join(parts)} "
            "(⟦fig:overhead⟧).")


def blocks(ctx: Context) -> list:
    """The method section's paragraphs and the grid list."""
    return [Para(model_and_data(ctx)), Para("The grid, read from the study's config:"), Items(grid_items(ctx)),
            Para(timing(ctx)), Para(intervals(ctx)), Para(costs(ctx)), Para(where_time_went(ctx))]

