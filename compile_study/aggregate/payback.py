"""What a user pays to reach a configuration's compiled step, by way, and after how many steps it pays back.

    costs = starts(records, compiles, checks)        # {way: {CONFIG values: payback_stats.Cost}}
    cells = payback_cells(row, eager_runs, costs, speedups, train_rows)   # summary.csv's columns of one row

A way is how a user starts (WAYS): "cold", from an empty cache (the compile phase's cold compiles, or a study's
first runs before it had one); "portable", from an empty cache fed the portable artifacts a first cold compile
saved (the compile phase's portable starts); and "warm", from a cache an earlier run filled (the timed runs'
warm-cache loads). Each way gives every compiled configuration a payback_stats.Cost (its seconds, one per process) and from it a
cold-start interval and a break-even with its interval (payback_stats.break_even). A new way (portable cache artifacts,
a regional compile scope) is a name in columns.WAYS and a function here that lists its seconds per configuration.

Every second a user would pay is charged, once, as a user alone pays it:
  - a compile that started from another mode's GEMM search (vocab.SEARCH_SHARED) is charged that search too: the
    whole cold compile of the mode that searched (an upper bound of the search alone), added once;
  - the compile phase ran compiles up to k at once. Each compile's own k is how many ran at once while it held its
    slot, time-weighted (at_once.mean_at_once, from the compile records' windows: the phase's end leaves some
    with fewer). A compile among others is divided by the slowdown a factor measured at k at once gives at its own
    k (at_once.share: 1 + (factor - 1) x (its k - 1) / (k - 1)), with the factor's interval (`how`: "divided").
    The factor (charging_factor) is the study's compile-concurrency check where its interval excludes 1, else the
    checks kept in benchmarks/compile-at-once/ (at_once.MEASURED_DIR) for the device, the same way in every study;
    where neither has one that excludes 1, compiles among others are used as timed, an upper bound ("contended").
    One timed alone is used as timed ("alone"); a study's first runs before the compile phase, as their records
    have them ("first-runs").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from compile_study.aggregate.columns import WAYS, break_even_prefix, columns, start_prefix
from compile_study.aggregate.estimate import at_once as at_once_factor
from compile_study.core import payback_stats, stats, vocab
from compile_study.core.dataset.data import steps_per_epoch

CELL = ["device_type", "reference_regime", "precision", "batch_size"]
CONFIG = ["device_type", "shape_regime", "precision", "batch_size", "compile_mode", "compile_scope"]
HOWS = ("alone", "divided", "contended", "first-runs")  # how a configuration's cold compiles were charged
# what the paper advises for each compiled configuration (`payback`), by its verdict against eager
PAYBACK = {"faster": "pays-after", "slower": "never", "within-noise": "never", "indistinct": "not-shown-faster",
           "few-runs": "few-runs", "no-control": "no-control"}


def eager_of_cell(records: pd.DataFrame) -> dict:
    """The eager `module` runs (AdamW foreach) of each cell: every comparison's baseline."""
    eager = records[(records.compile_mode == "eager") & (records.compile_scope == "module") & (records.status == "ok")]
    return {k: g for k, g in eager.groupby(CELL)}


def _eager_overhead(records: pd.DataFrame) -> dict:
    """Per cell, eager's epoch 1 minus epoch 2 (the median over its runs): first-epoch costs that are not compiling."""
    return {k: (g.epoch1_s - g.epoch2_s).median() for k, g in eager_of_cell(records).items()}


def cold_sources(records: pd.DataFrame, compiles: pd.DataFrame | None = None) -> dict[tuple, pd.DataFrame]:
    """Each compiled configuration's cold compiles, keyed by its CONFIG values: a frame with `seconds` (epoch 1 minus
    epoch 2 of a process that found its cache empty, or empty but for a shared GEMM search, less eager's in the
    cell) and how each ran (`at_once`, `alone`, `inductor_cache`, `phase`). The compile phase's records where a
    configuration has any; else (a study made before the phase) its runs that began from an empty cache. A
    configuration in a cell without eager runs has none."""
    eager = _eager_overhead(records)
    cold = ("cold", vocab.SEARCH_SHARED)
    phase = None if compiles is None or compiles.empty else compiles.assign(mean_at_once=mean_at_once(compiles))[
        (compiles.status == "ok") & (compiles.compile_mode != "eager") & (compiles.start == "cold")].assign(
        reference_regime=lambda d: [vocab.Regime.parse(r).reference for r in d.shape_regime], phase=True)
    runs = records[(records.status == "ok") & (records.compile_mode != "eager") & records.inductor_cache.isin(cold)]
    runs = runs.assign(at_once=np.nan, mean_at_once=np.nan, alone=False, phase=False)
    out = {}
    for source in (runs, phase):  # the compile phase's, where a configuration has any, replace its cold runs'
        if source is None:
            continue
        for key, g in source.groupby(CONFIG):
            cell = tuple(g[c].iloc[0] for c in CELL)
            if cell in eager:
                seconds = pd.to_numeric(g.epoch1_s - g.epoch2_s) - eager[cell]
                out[key] = pd.DataFrame({"seconds": seconds.astype(float), "at_once": pd.to_numeric(g.at_once),
                                         "mean_at_once": pd.to_numeric(g.mean_at_once), "alone": g.alone.astype(bool),
                                         "inductor_cache": g.inductor_cache, "phase": g.phase.astype(bool)})
    return out


def mean_at_once(compiles: pd.DataFrame) -> pd.Series:
    """Each compile record's k: how many of the phase's compiles (cold compiles and portable starts, every one
    that held a slot) ran at once while it held its slot, time-weighted (at_once.mean_at_once); where the records
    keep no window, the most it saw at once (`at_once`)."""
    held = list(compiles["held"]) if "held" in compiles else [None] * len(compiles)
    k = at_once_factor.mean_at_once([h if isinstance(h, list | tuple) else None for h in held])
    return pd.Series([m if m is not None else a for m, a in zip(k, pd.to_numeric(compiles.at_once))],
                     index=compiles.index, dtype=float)


def cold_compiles(records: pd.DataFrame, compiles: pd.DataFrame | None = None) -> dict[tuple, list[float]]:
    """Each compiled configuration's cold compiles in seconds, as timed (cold_sources)."""
    return {k: [float(v) for v in g.seconds] for k, g in cold_sources(records, compiles).items()}


def _search_provider(key: tuple, sources: dict) -> tuple | None:
    """The configuration whose GEMM search a shared-search one started from: a max-autotune mode at the same cell
    and scope whose own compiles were cold (grid.shared_search: the first searching mode of the sub-grid)."""
    named = dict(zip(CONFIG, key))
    for mode in vocab.AUTOTUNE_MODES:
        other = tuple(named[c] if c != "compile_mode" else mode for c in CONFIG)
        if other != key and other in sources and (sources[other].inductor_cache == "cold").all():
            return other
    return None


def concurrency_factor(check: dict | None) -> tuple[tuple | payback_stats.Ratio, int | None]:
    """A compile-concurrency check's factor (k at once over alone) and its k; none where it did not run. Today's
    check (and those kept in at_once.MEASURED_DIR): a payback_stats.Ratio of the phase's own compiles of its cell
    over the cell compiled alone; a stored study's older check: its per-round ratios."""
    if not check or not check.get("applicable"):
        return (), None
    if "phase" in check:
        return payback_stats.Ratio(tuple(float(p["cold_compile_s"]) for p in check["phase"]),
                           tuple(float(a["cold_compile_s"]) for a in check["alone"])), int(check["k"])
    return tuple(float(r["ratio"]) for r in check["results"]), int(check["k"])


def _interval(ratios) -> stats.Interval:
    return ratios.interval() if isinstance(ratios, payback_stats.Ratio) else stats.speedup_interval(ratios)


def charging_factor(check: dict | None, device: str | None) -> dict | None:
    """The factor cold compiles among others are divided by: {"ratios", "k", "interval", "source"}. The study's
    own compile-concurrency check ("study") where its interval excludes 1; else, of the checks kept in
    at_once.MEASURED_DIR for the device ("kept"), the one nearest the study's k whose interval excludes 1; None
    where none does (an interval holding 1 cannot say what a compile alone pays). `own`: the study's check's
    interval, said beside the factor used."""
    ratios, k = concurrency_factor(check)
    own = _interval(ratios) if k else None
    if own is not None and own.n >= stats.MIN_N and own.low > 1:
        return {"ratios": ratios, "k": k, "interval": own, "source": "study", "own": own}
    kept = [concurrency_factor(c) for c in at_once_factor.kept_checks(device)]
    kept = [(r, kk) for r, kk in kept if kk and _interval(r).n >= stats.MIN_N and _interval(r).low > 1]
    if not kept:
        return None
    r, kk = min(kept, key=lambda rk: (abs(rk[1] - (k or 8)), rk[1]))
    return {"ratios": r, "k": kk, "interval": _interval(r), "source": "kept", "own": own}


def _iv_json(iv: stats.Interval | None) -> dict | None:
    return None if iv is None else {"point": iv.point, "low": iv.low, "high": iv.high, "n": iv.n}


def factor_facts(check: dict | None, device: str | None) -> dict:
    """What the paper says of the factor (environment.json's compile_phase): the one compiles among others were
    divided by (`used`: its k, interval and source, or None) and the study's own check's (`own`), both figures."""
    f = charging_factor(check, device)
    ratios, k = concurrency_factor(check)
    return {"used": f and {"k": f["k"], "source": f["source"]} | _iv_json(f["interval"]),
            "own": {"k": k} | _iv_json(_interval(ratios)) if k else None}


def cold_costs(records: pd.DataFrame, compiles: pd.DataFrame | None, factor: dict | None) -> dict[tuple, tuple]:
    """Per compiled configuration: (payback_stats.Cost of its cold start as a user alone pays it, how it was charged:
    HOWS, the shared search's configuration or None); `factor`: charging_factor's; see the module docstring."""
    sources = cold_sources(records, compiles)
    out = {}
    for key, g in sources.items():
        k = g.mean_at_once.fillna(g.at_once).fillna(1.0).where(~g.alone, 1.0)
        shares = ()
        if not g.phase.all():
            how, divisor = "first-runs", ()
        elif (k <= 1).all():
            how, divisor = "alone", ()
        elif factor:
            how, divisor = "divided", factor["ratios"]
            shares = tuple(at_once_factor.share(float(x), factor["k"]) for x in k)
        else:
            how, divisor = "contended", ()
        provider = _search_provider(key, sources) if (g.inductor_cache == vocab.SEARCH_SHARED).any() else None
        if (g.inductor_cache == vocab.SEARCH_SHARED).any() and provider is None:
            continue  # the search it relied on has no cold compile: its cold start is unknown
        added = (tuple(sources[provider].seconds),) if provider else ()
        out[key] = (payback_stats.Cost(tuple(g.seconds), divisor, added, shares=shares), how, provider)
    return out


def warm_costs(records: pd.DataFrame) -> dict[tuple, payback_stats.Cost]:
    """Per compiled configuration: its warm-cache loads (epoch 1 minus epoch 2 of a timed run that found its cache
    filled, less eager's in the cell), one per run."""
    eager = _eager_overhead(records)
    runs = records[(records.status == "ok") & (records.compile_mode != "eager") & (records.inductor_cache == "warm")]
    out = {}
    for key, g in runs.groupby(CONFIG):
        cell = tuple(g[c].iloc[0] for c in CELL)
        if cell in eager:
            loads = tuple(float(v) for v in pd.to_numeric(g.epoch1_s - g.epoch2_s) - eager[cell])
            out[key] = payback_stats.Cost(loads, what=("warm-cache load", "concurrency round", "GEMM search"))
    return out


def portable_costs(records: pd.DataFrame, compiles: pd.DataFrame | None) -> dict[tuple, payback_stats.Cost]:
    """Per compiled configuration: its portable starts (rule portable_start: an empty cache fed the artifacts its
    first cold compile saved), each the artifacts' load plus epoch 1 minus epoch 2, less eager's in the cell. They
    ran among the compile phase's others and are charged as timed: an upper bound of what one alone pays (the
    compile-concurrency factor was measured on compiles, not on loads)."""
    if compiles is None or compiles.empty:
        return {}
    eager = _eager_overhead(records)
    ok = compiles[(compiles.status == "ok") & (compiles.start == "portable")].assign(
        reference_regime=lambda d: [vocab.Regime.parse(r).reference for r in d.shape_regime])
    out = {}
    for key, g in ok.groupby(CONFIG):
        cell = tuple(g[c].iloc[0] for c in CELL)
        if cell in eager:
            load = pd.to_numeric(g.artifacts_load_s).fillna(0.0)
            seconds = load + pd.to_numeric(g.epoch1_s - g.epoch2_s) - eager[cell]
            out[key] = payback_stats.Cost(tuple(float(v) for v in seconds), what=("portable start", "concurrency round",
                                                                           "GEMM search"))
    return out


def starts(records: pd.DataFrame, compiles: pd.DataFrame | None = None, checks: dict | None = None) -> dict:
    """{way: {CONFIG values: payback_stats.Cost}} for every way of WAYS, and {"how": {...}, "search": {...},
    "at_once": {...}} for the cold way's charging (cold_costs; each configuration's compiles' mean k)."""
    device = records.device_type.iloc[0] if len(records) else None
    cold = cold_costs(records, compiles, charging_factor((checks or {}).get("compile_concurrency"), device))
    sources = cold_sources(records, compiles)
    return {"cold": {k: c for k, (c, _, _) in cold.items()}, "portable": portable_costs(records, compiles),
            "warm": warm_costs(records), "how": {k: h for k, (_, h, _) in cold.items()},
            "search": {k: p for k, (_, _, p) in cold.items()},
            "at_once": {k: float(g.mean_at_once.mean()) for k, g in sources.items() if g.phase.all()}}


def payback(row, cold_n: int) -> str | None:
    """When compiling pays, for one configuration: after its break-even ("pays-after", the verdict is faster),
    "never" (slower, within noise, or a speedup not above 1), "not-shown-faster" (not distinguishable from
    eager), "few-runs" or "no-control" (no verdict), "no-cold-compile"; None for eager."""
    if row.compile_mode == "eager":
        return None
    if cold_n == 0:
        return "no-cold-compile"
    code = PAYBACK.get(row.verdict, "few-runs")
    return "never" if code != "few-runs" and not row.speedup > 1 else code


def payback_cells(row, costs: dict, speedups, train_rows: int) -> dict:
    """One compiled configuration's payback columns: per way its cost's interval (`<way>_start`) and break-even
    (`<way>_break_even`; inf where it never pays back), the cold way's epochs, how its cold start was charged and
    the search it was charged for, and the `payback` code."""
    config = tuple(row[c] for c in CONFIG)
    cold = costs["cold"].get(config)
    code = payback(row, len(cold.own) if cold else 0)
    cells = {"payback": code, "cold_start_how": costs["how"].get(config), "cold_at_once": costs["at_once"].get(config),
             "cold_search": costs["search"][config][CONFIG.index("compile_mode")] if costs["search"].get(config) else None}
    for way in WAYS:
        cost = costs[way].get(config, payback_stats.Cost())
        steps = payback_stats.break_even(cost, speedups, row.reference_step_ms)
        if code == "never":  # the compiled step is not faster: it never pays back, whatever the arithmetic says
            steps = stats.Interval(np.inf, np.nan, np.nan, steps.method, steps.n, steps.level)
        cells |= columns(start_prefix(way), payback_stats.cost_interval(cost)) | columns(break_even_prefix(way), steps)
    epoch = steps_per_epoch(row.batch_size, train_rows)
    return cells | {"full_epoch_steps": epoch, "break_even_epochs": cells["break_even_steps"] / epoch,
                    "break_even_epochs_low": cells["break_even_low"] / epoch,
                    "break_even_epochs_high": cells["break_even_high"] / epoch,
                    "break_even_epoch_code": epoch_code(code, cells["break_even_low"], cells["break_even_high"],
                                                        cells["break_even_n"], epoch)}


def epoch_code(code: str | None, low: float, high: float, n: int, epoch: int) -> str:
    """Where a compiled configuration's break-even from an empty cache lies against one epoch (its interval
    [low, high] of n values): "more" (wholly above an epoch, or `code` says it never pays back), "less" (wholly
    below), "straddles" (holding an epoch), "few-runs" (no interval): the abstract's sentence on cold starts
    counts these."""
    if code == "never":
        return "more"
    if not (n >= stats.MIN_N and np.isfinite(low)):
        return "few-runs"
    return "more" if low > epoch else "less" if high < epoch else "straddles"


def empty_columns() -> list[str]:
    """The payback columns a study without a compiled configuration still has (empty): every reader selects them."""
    none = stats.Interval(np.nan, np.nan, np.nan, "", 0, np.nan)
    out = ["payback", "cold_start_how", "cold_at_once", "cold_search"]
    for way in WAYS:
        out += [*columns(start_prefix(way), none), *columns(break_even_prefix(way), none)]
    return out + ["full_epoch_steps", "break_even_epochs", "break_even_epochs_low", "break_even_epochs_high",
                  "break_even_epoch_code"]
