"""Shared fixtures: small prepared data sets and one Inductor cache for the whole test session."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
AG_NEWS_DIR = REPO.parent / "shared" / "data" / "ag_news"  # the real test split, when present


def _gpu_reference() -> Path:
    import yaml

    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    return REPO / schema["properties"]["yardstick"]["properties"]["cuda"]["default"]


GPU_REFERENCE = _gpu_reference()  # the committed GPU reference study (config `yardstick`'s default)


UNGROUPED = pytest.StashKey[set]()  # node ids of grouped tests pytest-xdist did not group
TIERS = ("unit", "property", "compile", "dag", "golden", "gpu", "slurm")  # pyproject.toml says what each is


@pytest.hookimpl(trylast=True)  # after pytest-xdist's worker has named each test's group in its node id
def pytest_collection_modifyitems(config, items):
    """Every test belongs to a tier, so that `-m unit` (the fast tier) and the others add up to the suite; a
    module that runs something once for all its tests (`xdist_group`) really keeps them on one process."""
    loose = [item.nodeid for item in items if not any(item.get_closest_marker(t) for t in TIERS)]
    if loose:
        raise pytest.UsageError("tests without a tier marker (" + ", ".join(TIERS) + "): " + ", ".join(loose))
    config.stash[UNGROUPED] = set(ungrouped_tests(config, items))
    if not cuda_available():
        skip = pytest.mark.skip(reason="gpu tier: needs a CUDA device (this host has none)")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A grouped test that pytest-xdist would not keep on one process fails before its fixture starts."""
    if item.nodeid in item.config.stash.get(UNGROUPED, set()):
        import xdist

        pytest.fail(f"pytest {pytest.__version__} with pytest-xdist {xdist.__version__} ignores xdist_group (node "
                    f"ids lack the '@group' suffix): every process would run the group's fixture, e.g. two SLURM "
                    "studies at once that cancel each other's jobs; install the pins of requirements.txt",
                    pytrace=False)


def ungrouped_tests(config, items) -> list[str]:
    """Node ids of grouped tests that pytest-xdist failed to mark for one process (only a loadgroup worker marks)."""
    if not (hasattr(config, "workerinput") and config.getvalue("loadgroup")):
        return []
    return [item.nodeid for item in items
            if (mark := item.get_closest_marker("xdist_group")) and not item.nodeid.endswith(f"@{mark.args[0]}")]


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def pytest_addoption(parser):
    parser.addoption("--tier-record", metavar="PATH", help="write this session's outcome (counts, wall time, "
                     "hardware, versions, commit) as JSON to PATH, e.g. results/cuda/tests/gpu.json")


SESSION_START = pytest.StashKey[float]()
DURATIONS: dict[str, float] = {}  # node id -> seconds (setup, call, teardown), for --tier-record


def pytest_sessionstart(session):
    session.config.stash[SESSION_START] = time.time()


def pytest_runtest_logreport(report):
    """Each test's seconds (setup, call, teardown) for the tier record; under pytest-xdist, the controller's."""
    DURATIONS[report.nodeid] = DURATIONS.get(report.nodeid, 0.0) + report.duration


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    path = config.getoption("--tier-record")
    if not path:
        return
    from compile_study.core.calls import env
    from compile_study.core.io import write_json_atomic

    outcomes = {k: len(v) for k, v in terminalreporter.stats.items() if k}  # "" holds passing setups/teardowns
    wall = time.time() - config.stash[SESSION_START]
    dsession = config.pluginmanager.get_plugin("dsession")  # pytest-xdist's controller, where it ran workers
    workers = len(dsession.nodemanager.specs) if dsession is not None and getattr(dsession, "nodemanager", None) else None
    not_passed = sorted({r.nodeid for k in ("failed", "error") for r in terminalreporter.stats.get(k, [])})
    skipped_why = Counter(str(r.longrepr[2]).removeprefix("Skipped: ") for r in terminalreporter.stats.get("skipped", [])
                          if isinstance(r.longrepr, tuple) and len(r.longrepr) == 3)  # (file, line, reason)
    write_json_atomic(path, env.test_session(outcomes, wall, config.option.markexpr, list(config.invocation_params.args),
                                             interrupted=exitstatus == pytest.ExitCode.INTERRUPTED, workers=workers,
                                             not_passed=not_passed, durations=DURATIONS, skipped_why=dict(skipped_why)))
    terminalreporter.write_line(f"tier record: {path}")


def pytest_configure(config):
    from compile_study.core.calls import bytecode

    # Where torch has no bytecode (an image installed without it), each of the session's processes would
    # compile it from source (seconds each): they keep it once under .pytest_cache/pycache instead.
    bytecode.keep(Path(config.rootpath) / ".pytest_cache" / "pycache")
    # One Inductor cache per test session: the CPU compiles of the same tiny graph are paid once.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(config.rootpath) / ".pytest_cache" / "inductor"))
    os.environ["HF_HUB_OFFLINE"] = "1"  # never wait on the unreachable hub
    # The tests compile tiny graphs: one compile thread, so that no test process starts a pool of compile
    # workers as wide as a many-core host (a GPU host's 16 cores) for them. Timed study jobs set their own.
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    # pytest-xdist runs one test process per core; each one's own CPU work gets its share of the cores, not all
    # of them (on the 16-core GPU host, 16 processes of 16 threads each took 50-60 s for two in-process CPU
    # runs that take 2 s alone). A test that starts processes of its own leaves them torch's default.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers:
        import torch

        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // workers))


def data_cfg(**overrides) -> dict:
    cfg = dict(
        source="synthetic", csv_dir=None, hf_name="fancyzhx/ag_news", hf_timeout_s=1, eval_fraction=0.1,
        vocab_size=300, synthetic_rows=400, max_train_rows=None, seed=0,
    )
    return cfg | overrides


TINY_MODEL = dict(n_layers=2, n_heads=2, d_model=32, d_ff=64, dropout=0.0, max_len=32)


@pytest.fixture(scope="session")
def synthetic_data(tmp_path_factory) -> Path:
    from compile_study.core.dataset.data import prepare

    out = tmp_path_factory.mktemp("data")
    prepare(data_cfg(), TINY_MODEL["max_len"], out, out / "hf")
    return out


def alive(pid: int) -> bool:
    """Whether a process still runs (a zombie, left for its new parent to reap, has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def interruptible() -> None:
    """Popen's preexec_fn for a child a test stops with SIGINT (^C): the default disposition, whatever the test
    process inherited (a shell without job control starts its background commands with SIGINT ignored, and a
    child would inherit that and never stop)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
