"""How long a study's runs will take: an estimate printed before the study starts, and progress during it.

    python -m compile_study estimate config.yaml --device cuda [--gpus 2]

Per run, the estimate is the mean wall time (`overhead_s.total_s`) of the records already measured for the
same device, compile mode and scope: first this study's own, then any stored study's under reference/. With
no such record it falls back to PRIOR_S, a coarse per-mode guess, and says so. Torch-free.
"""

from __future__ import annotations

import argparse
import glob
import statistics
from collections import defaultdict
from pathlib import Path

from compile_study.core import record
from compile_study.core.layout import Layout

# Seconds per run when nothing has been measured yet (the message says "prior"). CUDA: first H200 runs, a cold
# repeat 0 (eager 16 s, default 29 s, max-autotune 152 s) averaged with two warm repeats, imports (6 s) included.
PRIOR_S = {
    "cuda": {"eager": 15, "default": 22, "reduce-overhead": 24, "max-autotune": 65, "max-autotune-no-cudagraphs": 65},
    "cpu": {"eager": 25, "default": 80, "reduce-overhead": 80, "max-autotune": 200, "max-autotune-no-cudagraphs": 200},
}


def measured_seconds(patterns: list[str], device: str) -> dict[tuple, list[float]]:
    """(compile_mode, compile_scope) -> wall seconds of earlier records of this device that carry a breakdown."""
    out: dict[tuple, list[float]] = defaultdict(list)
    for pattern in patterns:
        for path in glob.glob(pattern, recursive=True):
            try:
                rec = record.read(path)
            except (OSError, ValueError, KeyError):
                continue
            total = ((rec.get("metrics") or {}).get("overhead_s") or {}).get("total_s")
            if total and rec.get("env", {}).get("device_type") == device:
                out[(rec["config"]["compile_mode"], rec["config"].get("compile_scope", "module"))].append(total)
    return out


def run_seconds(keys, device: str, known: dict[tuple, list[float]]) -> tuple[float, int]:
    """Estimated seconds of these runs and how many estimates came from measured records (else PRIOR_S)."""
    seconds, measured = 0.0, 0
    for mode, scope, *_ in keys:
        if known.get((mode, scope)):
            seconds += statistics.mean(known[(mode, scope)])
            measured += 1
        else:
            seconds += PRIOR_S[device].get(mode, 60)
    return seconds, measured


def estimate(runs: dict, layout: Layout, device: str) -> dict:
    """Runs to do, their estimated seconds, and how many estimates came from measurements."""
    known = measured_seconds([layout.records_glob, "reference/*/runs/**/r*.json"], device)
    todo = [key for key in runs if not Path(layout.record(key)).exists()]
    seconds, measured = run_seconds(todo, device, known)
    return {"total": len(runs), "todo": len(todo), "seconds": seconds, "measured": measured}


def plan_message(runs: dict, layout: Layout, device: str, gpus: int = 1) -> str:
    e = estimate(runs, layout, device)
    source = (f"{e['measured']} of {e['todo']} from earlier records" if e["measured"] else "a per-mode prior")
    where = (f"on {gpus} GPUs with --resources timed_run={gpus}" if device == "cuda" and gpus > 1
             else "on one GPU" if device == "cuda" else "on the CPU")
    return (f"study plan: {e['todo']} of {e['total']} runs to do, about {e['seconds'] / 60 / max(gpus, 1):.0f} min "
            f"{where} (estimate: {source}; data preparation and aggregation not counted)")


def progress_message(records_glob: str, expected: int, device: str) -> str:
    """`runs done / total` and an ETA from this study's own runs so far (printed by each run as it ends)."""
    done = len(glob.glob(records_glob, recursive=True))
    times = [t for ts in measured_seconds([records_glob], device).values() for t in ts]
    eta = f"; ETA ~{max(expected - done, 0) * statistics.mean(times) / 60:.0f} min" if times else ""
    return f"progress: {done}/{expected} runs recorded{eta} (timed runs go one at a time per device)"


def main(argv: list[str] | None = None) -> None:
    from compile_study.core import grid

    parser = argparse.ArgumentParser(description="Estimate a study's device time from its grid.")
    parser.add_argument("configs", nargs="+", help="config.yaml, then overlays")
    parser.add_argument("--device", required=True, choices=["cpu", "cuda"])
    parser.add_argument("--gpus", type=int, default=1, help="timed runs at once (one per GPU)")
    args = parser.parse_args(argv)
    config = grid.load_config(args.configs)
    print(plan_message(grid.expand(config["grids"][args.device]), Layout(f"results/{args.device}"), args.device,
                       args.gpus))


if __name__ == "__main__":
    main()
