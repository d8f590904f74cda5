"""The whole-step CUDA graph and the optimizer variants: CPU checks here, GPU parity where CUDA exists."""

import copy

import pytest
import torch

from compile_study.core.dataset.batches import Batch
from compile_study.core.dataset.packing import make_packed_batches
from compile_study.core.models.model import ModelConfig, TextClassifier
from compile_study.measure.compile import compile_model, make_step
from compile_study.measure.step_graph import make_graphed_step, make_optimizer, training_state_kept
from compile_study.measure.steps import NotApplicable, make_batch_step

from .conftest import TINY_MODEL
from .test_packing import padded_twin, split

CPU = torch.device("cpu")
MODEL = ModelConfig(vocab_size=100, **TINY_MODEL)  # dropout 0: eager and graphed draw no random numbers


def batches(widths, rows: int = 8, device=CPU) -> list[Batch]:
    out = []
    for i, w in enumerate(widths):
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(2, 100, (rows, w), generator=g)
        ids[: rows // 2, w // 2 :] = 0  # half the rows shorter: padding in play
        labels = torch.randint(0, 4, (rows,), generator=g)
        out.append(Batch(ids.to(device), labels.to(device), int((ids != 0).sum()), rows))
    return out


def fresh(device=CPU, **opt):
    torch.manual_seed(0)
    model = TextClassifier(MODEL).to(device)
    return model, make_optimizer(model, 1e-2, device, **opt)


@pytest.mark.unit
def test_the_graphed_step_is_not_applicable_on_the_cpu():
    model, opt = fresh()
    with pytest.raises(NotApplicable, match="needs a CUDA device"):
        make_graphed_step(model, opt, "fp32", CPU)


@pytest.mark.unit
def test_a_capturable_optimizer_is_the_fused_one_with_a_tensor_lr():
    model, _ = fresh()
    with pytest.raises(ValueError, match="fused"):
        make_optimizer(model, 1e-3, CPU, capturable=True)
    assert make_optimizer(model, 1e-3, CPU, fused=True).defaults["fused"]


@pytest.mark.unit
@pytest.mark.parametrize("fused", [False, True])
def test_warm_up_inside_training_state_kept_leaves_no_trace(fused):
    """After warm-up steps the next step is the one an untouched model and optimizer would take."""
    data = batches([16, 16, 16])
    model, opt = fresh(fused=fused)
    step = make_step(model, opt, "fp32", CPU)
    step(data[0])  # optimizer state exists before the warm-up ...
    twin = copy.deepcopy(model)
    twin_opt = make_optimizer(twin, 1e-2, CPU, fused=fused)
    twin_opt.load_state_dict(copy.deepcopy(opt.state_dict()))  # state_dict() shares tensors
    with training_state_kept(model, opt):
        for b in data:
            step(b)
    torch.testing.assert_close(step(data[1]), make_step(twin, twin_opt, "fp32", CPU)(data[1]), rtol=0, atol=0)
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


@pytest.mark.unit
def test_state_first_created_in_the_warm_up_is_reset_to_a_fresh_optimizers():
    data = batches([16, 16])
    model, opt = fresh()
    fresh_model, fresh_opt = fresh()
    with training_state_kept(model, opt):
        make_step(model, opt, "fp32", CPU)(data[0])
    a, b = make_step(model, opt, "fp32", CPU), make_step(fresh_model, fresh_opt, "fp32", CPU)
    for d in data:
        torch.testing.assert_close(a(d), b(d), rtol=0, atol=0)


def flat(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def assert_same_trajectory(model, reference, start: torch.Tensor, tolerance: float = 2e-2) -> None:
    """The parameters differ by at most `tolerance` of the distance the reference moved. (Adam divides by
    |grad|: an element whose gradient is near eps moves by an arbitrary share of lr on rounding noise, so
    elementwise closeness of the parameters is not the property to ask for. A compiled model reorders fp32
    arithmetic: on an H200 it ended 1.2% of the distance apart after the test's steps, hence 2%.)"""
    got, want = flat(model), flat(reference)
    assert (got - want).norm() <= tolerance * (want - start).norm()


def run_pair(subject_step, reference_step, data, n: int):
    """n steps of both on data[i % len(data)] (a pair: the subject's batch, the reference's) -> their losses."""
    pairs = [d if isinstance(d, tuple) else (d, d) for d in data]
    losses = [(subject_step(pairs[i % len(pairs)][0]), reference_step(pairs[i % len(pairs)][1])) for i in range(n)]
    return torch.stack([a for a, _ in losses]), torch.stack([b for _, b in losses])


@pytest.mark.unit
def test_a_packed_step_trains_like_the_padded_step_on_the_same_sequences():
    ids, lengths, labels = split()
    packed = make_packed_batches(ids, lengths, labels, 4, seed=0, device=CPU, max_batches=1)[0]
    padded, _ = padded_twin(packed, ids, labels)
    (m1, o1), (m2, o2) = fresh(), fresh()
    start = flat(m2)
    packed_step = make_batch_step(m1, o1, "fp32", CPU, attention="sdpa")
    padded_step = make_batch_step(m2, o2, "fp32", CPU)
    got, want = run_pair(packed_step, padded_step, [(packed, padded)] * 3, 3)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert_same_trajectory(m1, m2, start)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["eager", "default"])
def test_graphed_step_trains_like_the_eager_step(mode):
    """Parity (fp32, dropout off): whole-step graph (fused capturable AdamW) vs eager step (AdamW foreach),
    over two shapes replayed out of capture order: one graph each, losses and parameters close."""
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    data = batches([16, 32, 32, 16, 32], device=dev)
    model, opt = fresh(dev, fused=True, capturable=True)
    ref, ref_opt = fresh(dev)
    start = flat(ref)
    torch._dynamo.reset()
    graphed = make_graphed_step(compile_model(model, mode), opt, "fp32", dev, batches=data[:1])
    got, want = run_pair(graphed, make_step(ref, ref_opt, "fp32", dev), data, 8)
    assert len(graphed.graphs) == 2
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert_same_trajectory(model, ref, start)


@pytest.mark.gpu
def test_graphed_packed_step_trains_like_the_eager_packed_step():
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    ids, lengths, labels = split()
    data = make_packed_batches(ids, lengths, labels, 4, seed=0, device=dev, max_batches=4)
    model, opt = fresh(dev, fused=True, capturable=True)
    ref, ref_opt = fresh(dev)
    start = flat(ref)
    torch._dynamo.reset()
    graphed = make_graphed_step(compile_model(model, "default"), opt, "fp32", dev, batches=data)
    got, want = run_pair(graphed, make_batch_step(compile_model(ref, "default"), ref_opt, "fp32", dev), data, 6)
    assert len(graphed.graphs) == 1  # one shape, whatever the masks
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert_same_trajectory(model, ref, start)


@pytest.mark.gpu
def test_the_eager_step_graph_scope_replays_the_eager_step():
    """Scope eager-step-graph as a run builds it (measure/compile.py subject_model, build_step): nothing compiled,
    a fused capturable AdamW with its learning rate on the device, the eager model's whole step captured once per
    shape and replayed. fp32, dropout off: its losses and parameters stay close to the eager step's (AdamW foreach)
    from the same seed, and Dynamo compiled no graph."""
    from compile_study.core.record import RunConfig
    from compile_study.measure.compile import build_step, new_model, subject_model
    from compile_study.measure.compile_stats import CompileWatch

    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch._dynamo.reset()
    run = RunConfig(compile_mode="eager", compile_scope="eager-step-graph", batch_size=8, shape_regime="static",
                    precision="fp32", repeat=0, lr=1e-2)
    data = batches([16, 32, 32, 16, 32], device=dev)
    watch = CompileWatch().start()
    model, opt = subject_model(MODEL, run, dev)
    assert all(g["fused"] and g["capturable"] and torch.is_tensor(g["lr"]) for g in opt.param_groups)
    graphed = build_step(model, opt, run, dev, watch)
    ref, ref_opt = new_model(MODEL, run, dev)
    start = flat(ref)
    torch.testing.assert_close(flat(model), start, rtol=0, atol=0)  # the same seeded weights
    got, want = run_pair(graphed, make_step(ref, ref_opt, "fp32", dev), data, 8)
    assert len(graphed.graphs) == 2 and watch.report()["graphs_compiled"] == 0
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert_same_trajectory(model, ref, start)
