"""How far from the best training step: eager -> fused AdamW -> compiled -> reduce-overhead -> the whole step in
one CUDA graph, and packed rows against statically padded ones (a benchmark to run on the GPU, not a test).

    python benchmarks/best_step.py --out results/cuda/best_step.json [--data-dir resources/data]
    python benchmarks/best_step.py --tiny --out /tmp/best_step_tiny.json   # CPU smoke run: tiny model, few steps

The project's model (4 layers, 4 heads, d_model 256, d_ff 1024, max_len 128), bf16 autocast on CUDA. Without
--data-dir the token ids are synthetic with a news-like length spread (median 0.39 max_len, ~58% padding at
max_len), and the record says so. First a parity check: the whole-step graph (default-compiled model, fused
capturable AdamW) against the eager step (AdamW foreach), fp32, dropout off. Then every case in a fresh process
(one long-lived process that compiles many models drifts host-bound steps up to 2x slower): warm-up steps
excluded, then `blocks` blocks of steps, device synchronised around each, the median block's mean step time
reported; real tokens/s likewise. A torch.profiler pass after the timing gives the host/device split.
Cases that cannot run on the device (CUDA graphs on the CPU) are recorded as not_applicable; cases past the
time budget as skipped. The JSON goes to --out; a short table is printed last.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from compile_study.core.calls.env import collect
from compile_study.core.dataset.batches import make_batches
from compile_study.core.dataset.data import load_split
from compile_study.core.dataset.packing import make_packed_batches, real_lengths
from compile_study.core.io import write_json_atomic
from compile_study.core.models.flops import step_flops
from compile_study.core.models.model import ModelConfig
from compile_study.core.models.plug import build_model
from compile_study.measure.compile import compile_model
from compile_study.measure.compile_stats import unique_graphs
from compile_study.measure.profiling import profile_steps
from compile_study.measure.step_graph import make_graphed_step, make_optimizer
from compile_study.measure.steps import NotApplicable, make_batch_step, set_precision
from compile_study.measure.timing import synchronize, time_call, time_steps

MODEL = {"n_layers": 4, "n_heads": 4, "d_model": 256, "d_ff": 1024, "dropout": 0.1, "max_len": 128}
TINY = {"n_layers": 2, "n_heads": 2, "d_model": 32, "d_ff": 64, "dropout": 0.1, "max_len": 32}
VARIANTS = {  # name: (compile mode, fused AdamW, whole step in one CUDA graph)
    "eager": ("eager", False, False),  # AdamW as torch picks it: foreach on CUDA
    "eager-fused": ("eager", True, False),
    "default": ("default", False, False),
    "reduce-overhead-fused": ("reduce-overhead", True, False),
    "step-graph": ("default", True, True),
}
LR = 3e-4
REPO = Path(__file__).resolve().parents[1]


def synthetic_split(n: int, max_len: int, vocab: int, seed: int = 0):
    """ids [n, max_len] / lengths / labels in `load_split`'s layout, lengths lognormal around 0.39 max_len."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.rint(rng.lognormal(np.log(0.39 * max_len), 0.35, n)), 4, max_len).astype(np.int32)
    ids = np.where(np.arange(max_len)[None] < lengths[:, None], rng.integers(2, vocab, (n, max_len)), 0)
    return ids.astype(np.int32), lengths, rng.integers(0, 4, n)


def load_data(args, rows: int) -> tuple[ModelConfig, tuple, str]:
    params = dict(TINY if args.tiny else MODEL)
    if args.data_dir:
        facts = json.loads((Path(args.data_dir) / "facts.json").read_text())
        cfg = ModelConfig(vocab_size=facts["vocab_size"], **params)
        return cfg, load_split(args.data_dir, "train"), facts["description"]
    vocab = 300 if args.tiny else 8192
    split = synthetic_split(rows, params["max_len"], vocab)
    return ModelConfig(vocab_size=vocab, **params), split, "synthetic token ids, news-like lengths (lognormal)"


def build_step(variant: str, cfg: ModelConfig, device, precision: str, attention: str, batches):
    """-> (model, step) for a variant of VARIANTS; the same seed, so the same start, for every variant."""
    torch.manual_seed(0)
    model = build_model(cfg).to(device)
    mode, fused, graph = VARIANTS[variant]
    if graph and device.type != "cuda":
        raise NotApplicable(f"the whole-step CUDA graph needs a CUDA device, not {device.type}")
    opt = make_optimizer(model, LR, device, fused=fused, capturable=graph)
    compiled = compile_model(model, mode)
    if graph:
        return model, make_graphed_step(compiled, opt, precision, device, batches=batches[:1], attention=attention)
    return model, make_batch_step(compiled, opt, precision, device, attention)


def timed_blocks(step, batches, device, blocks: int, block_s: float, max_steps: int) -> dict:
    """Blocks of steps over the batches in turn -> median block mean step ms and real tokens/s, per-block values."""
    est = time_call(lambda: [step(b) for b in batches[:3]], device) / min(3, len(batches))
    n = max(5, min(max_steps, math.ceil(block_s / est)))
    ms, tok_s, events = [], [], []
    for k in range(blocks):
        chosen = [batches[(k * n + i) % len(batches)] for i in range(n)]
        losses = []
        per_step, wall = time_steps(lambda i: losses.append(step(chosen[i])), n, device)
        if not torch.isfinite(torch.stack(losses)).all():
            raise FloatingPointError("non-finite loss in the timed block")
        ms.append(1e3 * wall / n)
        tok_s.append(sum(b.real_tokens for b in chosen) / wall)
        events.append(statistics.median(per_step))
    return {"steps_per_block": n, "step_ms": statistics.median(ms), "block_step_ms": ms,
            "event_median_step_ms": statistics.median(events), "real_tokens_per_s": statistics.median(tok_s),
            "block_real_tokens_per_s": tok_s}


def measure(case: dict, args) -> dict:
    """One case, in this process: build, warm up, time, profile."""
    device = torch.device(args.device)
    precision = case.get("precision", args.precision)
    set_precision(precision)
    cfg, split, _ = load_data(args, rows=case["bs"] * 24)
    packed = case.get("regime") == "packed"
    attention = "flex" if device.type == "cuda" else "sdpa"  # FlexAttention has no CPU backward
    if packed:
        batches = make_packed_batches(*split, case["bs"], 0, device, max_batches=args.distinct_batches)
    else:
        batches = make_batches(*split, case["bs"], "static", 0, device, max_batches=args.distinct_batches)
    t0 = time.perf_counter()
    _, step = build_step(case["variant"], cfg, device, precision, attention, batches)
    for i in range(args.warmup):
        step(batches[i % len(batches)])
    synchronize(device)
    warmup_s = time.perf_counter() - t0  # building, compiling, capturing and the warm-up steps
    graphs = unique_graphs()
    out = {"warmup_s": warmup_s, **timed_blocks(step, batches, device, args.blocks, args.block_s, args.max_steps)}
    out["recompiles_after_warmup"] = unique_graphs() - graphs
    out["attention"] = attention if packed else "sdpa (padding mask)"
    counted = step_flops(cfg)  # FlopCounterMode's count (core/models/flops.py), after the timing
    computed = statistics.mean(counted.padded(*b.ids.shape) for b in batches)
    real = statistics.mean(counted.real(real_lengths(b)) for b in batches)
    out |= {"padding_fraction": 1 - sum(b.real_tokens for b in batches) / sum(b.ids.numel() for b in batches),
            "sequences_per_step": statistics.mean(b.real_rows for b in batches),
            "train_flops_per_step": computed, "real_train_flops_per_step": real,
            "achieved_tflops": computed / out["step_ms"] / 1e9, "real_tflops": real / out["step_ms"] / 1e9}
    try:
        out["profile"] = profile_steps(lambda i: step(batches[i % len(batches)]), 5, device)
    except Exception as exc:  # evidence after the timing: note the failure, keep the timings
        out["profile_error"] = f"{type(exc).__name__}: {exc}"[:300]
    return out


def parity(case: dict, args) -> dict:
    """Whole-step graph (default-compiled model, fused capturable AdamW) vs eager step (AdamW foreach): fp32,
    dropout off, the same start and batches -> loss and parameter differences."""
    device = torch.device(args.device)
    if device.type != "cuda":
        raise NotApplicable("the whole-step CUDA graph needs a CUDA device")
    set_precision("fp32")
    cfg, split, _ = load_data(args, rows=case["bs"] * 8)
    cfg = ModelConfig(**(cfg.to_dict() | {"dropout": 0.0}))
    batches = make_batches(*split, case["bs"], "static", 0, device, max_batches=4)
    graphed_model, graphed = build_step("step-graph", cfg, device, "fp32", "flex", batches)
    eager_model, eager = build_step("eager", cfg, device, "fp32", "flex", batches)

    def flat(model) -> torch.Tensor:
        return torch.cat([q.detach().flatten() for q in model.parameters()])

    start = flat(eager_model)
    pairs = [(graphed(b), eager(b)) for b in batches * 2]
    got, want = (torch.stack([p[k] for p in pairs]) for k in (0, 1))
    loss_rel = float(((got - want).abs() / want.abs()).max())
    # Adam divides by |grad|: compare how far apart the parameters ended relative to how far they moved
    moved = float((flat(graphed_model) - flat(eager_model)).norm() / (flat(eager_model) - start).norm())
    return {"steps": len(pairs), "losses_graphed": got.tolist(), "losses_eager": want.tolist(),
            "max_loss_rel_diff": loss_rel, "param_diff_over_movement": moved,
            "passed": loss_rel <= 1e-4 and moved <= 1e-2}


def run_case(case: dict, args, out_path: str) -> None:
    """The child process's work: measure `case` and write {status, ...} to out_path."""
    try:
        result = {"status": "ok", **(parity(case, args) if case["kind"] == "parity" else measure(case, args))}
    except NotApplicable as exc:
        result = {"status": "not_applicable", "reason": str(exc)}
    except Exception as exc:
        result = {"status": "error", "error": f"{type(exc).__name__}: {str(exc)[:500]}"}
    write_json_atomic(out_path, case | result)


def cases(args) -> list[dict]:
    """Parity first, then the step table per batch size, then real tokens/s packed vs static at equal budgets."""
    step_bs, token_bs = ((4, 16), (8,)) if args.tiny else ((32, 512, 2048), (64, 256))
    out = [{"kind": "parity", "bs": 4 if args.tiny else 32}]
    out += [{"kind": "step", "variant": v, "bs": bs} for bs in step_bs for v in VARIANTS]
    for variant in ("reduce-overhead-fused", "step-graph"):
        for bs in token_bs:
            out += [{"kind": "tokens", "regime": r, "variant": variant, "bs": bs} for r in ("static", "packed")]
    return out


def spawn(case: dict, args, budget_end: float) -> dict:
    """Run one case in a fresh interpreter (the repository importable), within the case timeout and the budget."""
    if time.monotonic() > budget_end:
        return case | {"status": "skipped", "reason": f"past the {args.budget_s:.0f} s budget"}
    with tempfile.TemporaryDirectory() as tmp:
        result_path = Path(tmp) / "case.json"
        cmd = [sys.executable, __file__, "--case", json.dumps(case), "--case-out", str(result_path)] + sys.argv[1:]
        env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.case_timeout_s)
        except subprocess.TimeoutExpired:
            return case | {"status": "timeout", "reason": f"over {args.case_timeout_s} s"}
        if not result_path.exists():
            return case | {"status": "error", "error": proc.stderr[-1500:], "returncode": proc.returncode}
        return json.loads(result_path.read_text()) | {"process_s": time.monotonic() - t0}


def table(results: list[dict]) -> str:
    rows = ["case                                   status          step ms   real Mtok/s  TFLOP/s  recompiles"]
    for r in results:
        name = {"parity": "parity (fp32, dropout off)", "step": f"bs{r['bs']} {r.get('variant')}",
                "tokens": f"bs{r['bs']} {r.get('regime')} {r.get('variant')}"}[r["kind"]]
        if r["kind"] == "parity" and r["status"] == "ok":
            verdict = "passed" if r["passed"] else "FAILED"
            rows.append(f"{name:38} {verdict:15} loss rel diff {r['max_loss_rel_diff']:.1e}, "
                        f"params apart / moved {r['param_diff_over_movement']:.1e}")
        elif r["status"] == "ok":
            rows.append(f"{name:38} {'ok':15} {r['step_ms']:8.2f}  {r['real_tokens_per_s'] / 1e6:11.3f}  "
                        f"{r['achieved_tflops']:7.2f}  {r['recompiles_after_warmup']:10d}")
        else:
            rows.append(f"{name:38} {r['status']:15} {r.get('reason') or r.get('error', '')[:60]}")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--data-dir", help="prepared data (resources/data); default: synthetic ids")
    ap.add_argument("--tiny", action="store_true", help="tiny model and few steps (a CPU smoke run)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--precision", default=None, help="default: bf16 on CUDA, fp32 on the CPU")
    ap.add_argument("--budget-s", type=float, default=330.0, help="start no case after this many seconds")
    ap.add_argument("--case-timeout-s", type=float, default=150.0, help="a case still running after this is killed")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # the child's case (JSON)
    ap.add_argument("--case-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.precision = args.precision or ("bf16" if args.device.startswith("cuda") else "fp32")
    # warm-up steps (compilation, CUDA-graph recording), blocks, target seconds and step cap per block
    args.warmup, args.blocks, args.block_s, args.max_steps = (3, 3, 0.05, 5) if args.tiny else (15, 5, 0.3, 100)
    args.distinct_batches = 4 if args.tiny else 8
    if args.case:
        run_case(json.loads(args.case), args, args.case_out)
        return
    t0 = time.monotonic()
    results = []
    for case in cases(args):
        results.append(spawn(case, args, t0 + args.budget_s))
        status = results[-1]["status"]
        print(f"[{time.monotonic() - t0:6.0f} s] {json.dumps(case)}: {status}", file=sys.stderr, flush=True)
    _, _, data = load_data(args, rows=8)
    write_json_atomic(args.out, {"benchmark": "best_step", "data": data, "model": TINY if args.tiny else MODEL,
                                 "precision": args.precision, "lr": LR, "env": collect(torch.device(args.device)),
                                 "protocol": {k: getattr(args, k) for k in ("warmup", "blocks", "block_s", "max_steps",
                                                                            "distinct_batches")},
                                 "wall_s": time.monotonic() - t0, "cases": results})
    print(table(results))


if __name__ == "__main__":
    main()
