"""When a timed run counts as disturbed by other work on its host, by stated limits (torch-free).

    found = judge(rec, Limits.of(config["disturbance"]))   # None, or the evidence: reasons and their numbers

A run is disturbed when, during its steady-state block (the interleaved block its speedup comes from):
- `cpu-load`: processes outside the study took more than `max_outside_cores` CPU seconds a second on the run's cores
  (the record's `host_load.block.outside_cores`, measured by measure/process/hostwatch.py, which says what "outside" is);
- `gpu-load`: another process used more than `max_other_gpu_util` percent of the run's GPU's SMs (NVML's
  per-process samples; absent where NVML cannot tell, which is then no evidence either way);
- `aa-stray`: the run is eager (module scope), so its in-process eager reference runs the same code as its
  subject, and the two medians differ by more than `max_aa_ratio` either way. Interleaved in chunks, they
  share every slow spell of the host: a reference of 658 ms against a step of 6.0 ms is itself the evidence.
measure/jobs.py redoes a disturbed run up to `redos` times, keeping each disturbed attempt inside the record
that replaces it (`earlier_attempts`); a run still disturbed after its redos keeps its flag, and the summary
gives its configuration no verdict.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

REASONS = ("cpu-load", "gpu-load", "aa-stray")  # the templates word them


@dataclass(frozen=True)
class Limits:
    """Config `disturbance` (its schema holds the same defaults: tests/test_disturbance.py checks them)."""

    max_outside_cores: float = 0.25  # CPU seconds per second of the block that others may take on the run's cores
    max_other_gpu_util: float = 5.0  # percent of the GPU's SMs another process may use during the block
    max_aa_ratio: float = 1.5  # how far an eager run's reference and its own step may differ, either way
    redos: int = 2  # how often a disturbed run is redone before it is kept as disturbed

    @classmethod
    def of(cls, config: dict | None) -> Limits:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (config or {}).items() if k in known})


def aa_ratio(rec: dict) -> float | None:
    """An eager (module) run's reference step over its own step; None for any other run or without both."""
    cfg, m = rec.get("config") or {}, rec.get("metrics") or {}
    if cfg.get("compile_mode") != "eager" or cfg.get("compile_scope", "module") != "module":
        return None
    ref, own = m.get("reference_step_ms"), m.get("steady_step_ms")
    return ref / own if ref and own else None


def judge(rec: dict, limits: Limits) -> dict | None:
    """The evidence that a finished run was disturbed (its reasons, the numbers and the limits), or None.
    Only a run that measured something ("ok") is judged."""
    if rec.get("status") != "ok":
        return None
    block = ((rec.get("metrics") or {}).get("host_load") or {}).get("block") or {}
    cores, util = block.get("outside_cores"), (block.get("gpu") or {}).get("other_sm_util")
    ratio = aa_ratio(rec)
    reasons = [reason for reason, over in (
        ("cpu-load", cores is not None and cores > limits.max_outside_cores),
        ("gpu-load", util is not None and util > limits.max_other_gpu_util),
        ("aa-stray", ratio is not None and max(ratio, 1 / ratio) > limits.max_aa_ratio)) if over]
    if not reasons:
        return None
    steal, wall = block.get("steal_cpu_s"), block.get("wall_s")
    return {"reasons": reasons, "outside_cores": cores, "other_sm_util": util, "aa_ratio": ratio,
            "busiest": block.get("busiest"), "steal_cores": steal / wall if steal is not None and wall else None,
            "limits": asdict(limits)}


def describe(found: dict) -> str:
    """The evidence in one line, for the job's log: "other processes took 1.02 CPU s/s on its cores (limit 0.25)";
    where a hypervisor gave part of that time to another guest (steal, a virtual machine's neighbour), how much."""
    lim, words = found["limits"], []
    if "cpu-load" in found["reasons"]:
        who = ", ".join(f"{name} {pid}" for pid, name, _ in (found.get("busiest") or [])[:3])
        steal = found.get("steal_cores") or 0.0
        what = (f"work outside the study took {found['outside_cores']:.2f} CPU s/s on its cores (limit "
                f"{lim['max_outside_cores']}), {steal:.2f} of it steal (the hypervisor ran another guest)"
                if steal >= 0.005 else f"other processes took {found['outside_cores']:.2f} CPU s/s on its cores (limit "
                f"{lim['max_outside_cores']})")
        words.append(f"{what}{f'; busiest: {who}' if who else ''}")
    if "gpu-load" in found["reasons"]:
        words.append(f"another process used {found['other_sm_util']}% of the GPU's SMs (limit {lim['max_other_gpu_util']}%)")
    if "aa-stray" in found["reasons"]:
        words.append(f"its eager reference took {found['aa_ratio']:.2f}x its own step (limit {lim['max_aa_ratio']}x "
                     "either way)")
    return "; ".join(words)
