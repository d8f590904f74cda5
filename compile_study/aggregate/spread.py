"""Why a configuration's speedup spreads between processes, and between studies: the evidence its records hold,
laid side by side, and what it rules out (torch-free).

    python -m compile_study spread reference/h200-full-2026-12-03 reference/h200-quick-2026-12-03b \
        --configuration static bf16 512 default module         # every process of it, study by study

Per process (`processes`): its speedup; its compiled step's floor (its fastest timed step: no step is faster than
the GPU's own work) and median, and the share of its steps within FLOOR_BAND of that floor; the eager reference's
median; the GPU's SM clock, temperature, power and utilisation in its timed block (NVML, measure/process/hostwatch.py);
the Inductor cache it started from (every compiled run starts from its configuration's first cold compile's
cache, warm) and how many kernels Inductor generated; for the profiled process, the GPU's busy time and kernels
per step, and its top kernels. A top kernel's trailing number is Inductor's counter of kernels of that name in
one compile, not a choice: `family` drops it before kernels are compared between studies.

`explain(records, key)` weighs one study's processes of a configuration; each finding rules a cause out:
  clocks      the SM and memory clocks varied by under CLOCK_SAME between processes: not the GPU's clocks
  compile     every process started from the warm cache and ran as many generated kernels: one cold compile's
              kernels in all of them, not Inductor's choices
  alone       no other process used the GPU's SMs during any timed block: not a neighbour on the GPU
  cause "host" where all three hold: the same kernels at the same clocks on a GPU of its own do the same work
              each step (the profiled process says how long: its device-busy time), so what differs between the
              processes' steps is time the GPU sat idle, waiting for the host to launch its kernels; the floors
              (fastest steps), the share of steps at the floor and the GPU's utilisation show how often it
              waited. "open" otherwise: the paper says what was ruled out. `paper_case` picks what the paper
              explains: the default mode at the largest static batch, beside the same cell with CUDA graphs.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from compile_study.core import vocab
from compile_study.core.intervals import MIN_N

FLOOR_BAND = 1.05  # a step within 5% of its process's fastest counts as "at the floor"
CLOCK_SAME = 1.01  # max / min of a clock across processes below which it held
KERNEL_SAME = 1.05  # max / min of a kernel's ms per step across studies below which it took as long
KEY = ("shape_regime", "precision", "batch_size", "compile_mode", "compile_scope")


def family(name: str) -> str:
    """A kernel's name without Inductor's trailing counter (triton_poi_fused_gelu_..._view_13 -> ..._view)."""
    return name.rsplit("_", 1)[0] if name.startswith("triton_") and name.rsplit("_", 1)[-1].isdigit() else name


def _floats(values) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], float) if isinstance(values, list) else np.array([])


def processes(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per successful process of one configuration (its runs' record.table rows): the evidence."""
    rows = []
    for _, r in runs[runs.status == "ok"].sort_values("repeat").iterrows():
        steps, ref = _floats(r.step_times_ms), _floats(r.reference_step_times_ms)
        floor = float(np.nanmin(steps)) if len(steps) else np.nan
        top = json.loads(r.profile_top_kernels) if isinstance(r.profile_top_kernels, str) else []
        rows.append({"repeat": int(r["repeat"]), "speedup": r.in_process_speedup, "floor_ms": floor,
                     "median_ms": float(np.nanmedian(steps)) if len(steps) else np.nan,
                     "at_floor": float(np.mean(steps <= FLOOR_BAND * floor)) if len(steps) else np.nan,
                     "reference_ms": float(np.nanmedian(ref)) if len(ref) else np.nan,
                     "sm_clock_mhz": r.host_gpu_sm_clock_mhz, "temperature_c": r.host_gpu_temperature_c,
                     "power_w": r.host_gpu_power_w, "utilization": r.host_gpu_utilization,
                     "memory_clock_mhz": r.host_gpu_memory_clock_mhz, "other_sm_util": r.host_gpu_other_sm_util,
                     "cache": r.inductor_cache, "generated_kernels": r.generated_kernels,
                     "device_busy_ms": r.profile_device_busy_ms_per_step, "kernels_per_step": r.profile_kernels_per_step,
                     "top_kernels": [{"family": family(k["name"]), "name": k["name"], "ms_per_step": k["ms_per_step"]}
                                     for k in top]})
    found = pd.DataFrame(rows)
    if len(found):
        found["above_floor"] = found.median_ms / found.floor_ms - 1  # how far the median sat above the floor
    return found


def _span(values) -> list[float] | None:
    v = pd.to_numeric(pd.Series(values), errors="coerce").dropna()
    return [float(v.min()), float(v.max())] if len(v) else None


def _held(span: list[float] | None, limit: float) -> bool | None:
    return None if span is None or span[0] <= 0 else span[1] / span[0] < limit


def _runs(records: pd.DataFrame, key: tuple) -> pd.DataFrame:
    return records[(records[list(KEY)].apply(tuple, axis=1) == tuple(key))]


def explain(records: pd.DataFrame, key: tuple) -> dict | None:
    """What one study's records say of one configuration's spread between its processes (module docstring): the
    span of every quantity, each finding, the cause code, and the same cell with CUDA graphs as a contrast; None
    under MIN_N processes."""
    p = processes(_runs(records, key))
    if len(p) < MIN_N:
        return None
    spans = {c: _span(p[c]) for c in ("speedup", "floor_ms", "median_ms", "above_floor", "at_floor", "reference_ms",
                                      "sm_clock_mhz", "temperature_c", "power_w", "utilization", "device_busy_ms",
                                      "kernels_per_step", "generated_kernels")}
    kernels = set(p.generated_kernels.dropna())
    memory = _span(p.memory_clock_mhz)
    others = pd.to_numeric(p.other_sm_util, errors="coerce").dropna()
    found = {"clocks": None if spans["sm_clock_mhz"] is None else bool(
                 _held(spans["sm_clock_mhz"], CLOCK_SAME) and _held(memory, CLOCK_SAME) is not False),
             "compile": bool(set(p.cache) == {vocab.CACHE_STATES[1]} and len(kernels) == 1) if kernels else None,
             "alone": bool((others <= 0).all()) if len(others) else None}
    return {**dict(zip(KEY, key)), "n": len(p), "spans": spans, "found": found, "floor_band": FLOOR_BAND - 1,
            "cause": "host" if all(found.values()) else "open",
            "ruled_out": [k for k, v in found.items() if v], "open": [k for k, v in found.items() if not v],
            "graphs": _contrast(records, key)}


def _contrast(records: pd.DataFrame, key: tuple) -> dict | None:
    """The same regime, precision, batch and scope with a CUDA-graph mode: its speedups' span and n."""
    for mode in vocab.CUDAGRAPH_MODES:
        p = processes(_runs(records, (*key[:3], mode, key[4])))
        if len(p) >= MIN_N:
            return {"compile_mode": mode, "n": len(p), "speedup": _span(p.speedup), "at_floor": _span(p.at_floor)}
    return None


# what processes() reads of record.table's columns
READ = ("repeat", "status", "in_process_speedup", "step_times_ms", "reference_step_times_ms", "host_gpu_sm_clock_mhz",
        "host_gpu_memory_clock_mhz", "host_gpu_temperature_c", "host_gpu_power_w", "host_gpu_utilization",
        "host_gpu_other_sm_util", "inductor_cache", "generated_kernels", "profile_device_busy_ms_per_step",
        "profile_kernels_per_step", "profile_top_kernels")


def paper_case(records: pd.DataFrame) -> dict | None:
    """The case the paper explains: the default mode (module scope, static shapes) at the largest batch that has
    MIN_N processes with the GPU's state recorded, the precision whose speedups spread widest; None without (or
    where the records lack what processes() reads)."""
    if not set(READ) <= set(records.columns):
        return None
    ok = records[(records.status == "ok") & (records.shape_regime == "static") & (records.compile_mode == "default")
                 & (records.compile_scope == "module") & pd.to_numeric(records.host_gpu_sm_clock_mhz,
                                                                        errors="coerce").notna()]
    counts = ok.groupby(["batch_size", "precision"]).size()
    counts = counts[counts >= MIN_N]
    if counts.empty:
        return None
    largest = int(counts.index.get_level_values(0).max())
    found = [explain(records, ("static", precision, largest, "default", "module"))
             for precision in sorted(counts.loc[largest].index)]
    return max(found, key=lambda e: e["spans"]["speedup"][1] / e["spans"]["speedup"][0])


def between(studies: dict[str, pd.DataFrame], key: tuple) -> list[dict]:
    """One configuration in several studies (name -> record.table): per study its processes' spans, its profiled
    process's busy time and kernels, and its top kernels by family (name -> ms per step)."""
    out = []
    for name, records in studies.items():
        p = processes(_runs(records, key))
        if p.empty:
            continue
        top = {k["family"]: k["ms_per_step"] for kernels in p.top_kernels for k in kernels}
        out.append({"study": name, "n": len(p), "speedup": _span(p.speedup), "floor_ms": _span(p.floor_ms),
                    "median_ms": _span(p.median_ms), "at_floor": _span(p.at_floor),
                    "utilization": _span(p.utilization), "sm_clock_mhz": _span(p.sm_clock_mhz),
                    "generated_kernels": _span(p.generated_kernels), "device_busy_ms": _span(p.device_busy_ms),
                    "kernels_per_step": _span(p.kernels_per_step), "top_kernels": top,
                    "names": sorted({k["name"] for kernels in p.top_kernels for k in kernels})})
    return out


def cold_compiles(compiles: pd.DataFrame, key: tuple) -> list[float]:
    """The kernels Inductor generated in each of a configuration's cold compiles (compile_record.table), by index:
    how far its choices differ between cold compiles of one configuration on one host."""
    mine = compiles[(compiles[list(KEY)].apply(tuple, axis=1) == tuple(key)) & (compiles.status == "ok")]
    return [float(k) for k in mine.sort_values("index").generated_kernels]


def kernels_agree(found: list[dict], limit: float = KERNEL_SAME) -> dict:
    """Whether the studies' profiled top kernels are one set by family, each within `limit` in ms per step, while
    their exact names differ (Inductor's counters): the kernels' choices and times compared between studies.
    `cause` "host" where they are, and the profiled busy time per step and the SM clock agree too: the studies'
    GPUs did the same work, so their speedups differ by how long the GPU waited for the host; else "open"."""
    tops = [f["top_kernels"] for f in found if f["top_kernels"]]
    families = [set(t) for t in tops]
    same = bool(tops) and all(f == families[0] for f in families)
    ms = {k: [t[k] for t in tops] for k in families[0]} if same else {}
    busy = [x for f in found for x in f["device_busy_ms"] or []]
    clocks = [x for f in found for x in f["sm_clock_mhz"] or []]
    within = same and all(max(v) / min(v) < limit for v in ms.values() if min(v) > 0)
    work = bool(within and busy and max(busy) / min(busy) < limit and clocks and max(clocks) / min(clocks) < CLOCK_SAME)
    return {"studies": len(tops), "same_families": same,
            "names_differ": len({tuple(f["names"]) for f in found if f["names"]}) > 1, "within": within,
            "widest_ratio": max((max(v) / min(v) for v in ms.values() if min(v) > 0), default=float("nan")),
            "cause": "host" if work else "open"}


def main(argv: list[str] | None = None) -> None:
    import argparse

    from compile_study.core import record
    from compile_study.core.layout import Layout, require_study

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("studies", nargs="+", help="study directories (stored or live)")
    parser.add_argument("--configuration", nargs=5, required=True, metavar=("REGIME", "PRECISION", "BATCH", "MODE",
                                                                           "SCOPE"))
    args = parser.parse_args(argv)
    regime, precision, batch, mode, scope = args.configuration
    if not batch.isdigit():
        raise SystemExit(f"--configuration: BATCH {batch!r} is not a batch size (a whole number, e.g. 512)")
    key = (regime, precision, int(batch), mode, scope)
    columns = ["repeat", "speedup", "floor_ms", "median_ms", "at_floor", "reference_ms", "sm_clock_mhz",
               "temperature_c", "power_w", "utilization", "cache", "generated_kernels", "device_busy_ms",
               "kernels_per_step"]
    with pd.option_context("display.width", 200, "display.precision", 3):
        for name in args.studies:
            p = processes(_runs(record.table(Layout(str(require_study(name))).stored_records()), key))
            print(f"{name}: {' '.join(map(str, key))}, {len(p)} processes")
            print(p[columns].to_string(index=False) if len(p) else "  (none)")
            for kernels in p.get("top_kernels", []):
                for k in kernels:
                    print(f"  top kernel {k['ms_per_step']:.3f} ms/step  {k['name']}")
