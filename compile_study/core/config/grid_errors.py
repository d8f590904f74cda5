"""A sub-grid that cannot run as written: names that repeat, bucket sets that do not end at model.max_len,
autotune batch sizes outside batch_size, a CUDA-only scope in a CPU grid, and a sub-grid or compile mode that gets
no run, each named with the fix."""

from __future__ import annotations

from compile_study.core import vocab
from compile_study.core.config import grid
from compile_study.core.config.config_problem import Problem


def grid_errors(device: str, grids: list[dict], max_len: int) -> list[Problem]:
    out = []
    names = [g["name"] for g in grids]
    if len(set(names)) != len(names):
        out.append(Problem(f"grids.{device}: sub-grid names must be unique, got {names}", ("grids", device)))
    for i, g in enumerate(grids):
        key, path = f"grids.{device}[{i}]", ("grids", device, i)
        for j, edges in enumerate(g["bucket_sets"] if "bucketed" in g["shape_regime"] else []):
            if edges != sorted(set(edges)):
                out.append(Problem(f"{key}.bucket_sets[{j}]: {edges} must be strictly increasing", path))
            elif edges[-1] != max_len:
                out.append(Problem(f"{key}.bucket_sets[{j}]: {edges} must end at model.max_len ({max_len}) "
                                   "so that every sequence fits a bucket", path, ("model", "max_len")))
        extra = set(g.get("max_autotune_batch_sizes") or []) - set(g["batch_size"])
        if extra:
            out.append(Problem(f"{key}.max_autotune_batch_sizes: {sorted(extra)} are not in batch_size "
                               f"{g['batch_size']}", path))
        out += cuda_only_scopes(device, key, path, g)
        out += runless_modes(f"{key} ({g['name']})", path, grid.grid_defaults() | g)
    if len(grids) > 1 and not grid.expand(grids):
        out.append(Problem(f"grids.{device}: no sub-grid has a run, so the study would have nothing to summarise",
                           ("grids", device)))
    return out


def cuda_only_scopes(device: str, key: str, path: tuple, g: dict) -> list[Problem]:
    """A scope that captures the whole step as a CUDA graph (vocab.CUDA_ONLY_SCOPES) in a CPU grid: the CPU has no
    CUDA graphs, so every run of it would be recorded as not applicable."""
    scopes = [s for s in g.get("compile_scope") or [] if s in vocab.CUDA_ONLY_SCOPES]
    if device != "cpu" or not scopes:
        return []
    return [Problem(f"{key}.compile_scope: {', '.join(scopes)} captures the whole step as a CUDA graph, which the "
                    "CPU does not have: list it under grids.cuda", path)]


def runless_modes(label: str, path: tuple, g: dict) -> list[Problem]:
    """A sub-grid that expands to no run, or a compile mode it lists that gets none, named with the fix."""
    empty = [m for m in g["compile_mode"] if not grid.expand([g | {"compile_mode": [m]}])]
    if empty and len(empty) == len(g["compile_mode"]):
        why = "; ".join(f"{m} {_why_no_runs(g, m)}" for m in empty)
        return [Problem(f"{label} expands to no runs: {why}", path)]
    return [Problem(f"{label}: compile_mode {m} gets no run: it {_why_no_runs(g, m)}", path) for m in empty]


def _why_no_runs(g: dict, mode: str) -> str:
    """Which of the vocabulary's rules (vocab.runs_with) drop every run of `mode`, and what would keep them."""
    scopes, batches, autotune = g["compile_scope"], g["batch_size"], g.get("max_autotune_batch_sizes")
    regimes = vocab.expand_regimes(g["shape_regime"], g.get("bucket_sets") or [])
    reasons = []
    if mode == "eager" and not set(scopes) & set(vocab.EAGER_SCOPES):
        reasons.append(f"runs at compile_scope {', '.join(vocab.EAGER_SCOPES)} only (eager module is the reference "
                       "of every scope): add module to compile_scope")
    if mode == "eager" and all(vocab.Regime.parse(r).compiled_only for r in regimes):
        reasons.append(f"skips shape_regime {', '.join(regimes)} (the eager run of regime dynamic is their "
                       "reference): add dynamic or static to shape_regime")
    if mode in vocab.AUTOTUNE_MODES and autotune is not None and not set(autotune) & set(batches):
        reasons.append(f"runs only at max_autotune_batch_sizes {autotune}, none of batch_size {batches}: "
                       "list some of them, or null for all")
    if mode != "eager" and not any(mode in vocab.SCOPE_MODES[s] for s in scopes):
        takes = sorted(s for s in vocab.COMPILE_SCOPES if mode in vocab.SCOPE_MODES[s])
        reasons.append(f"does not run at compile_scope {', '.join(scopes)}: {mode} runs at {', '.join(takes)}")
    return " and ".join(reasons) or "matches none of the rules in compile_study.core.vocab.runs_with"
