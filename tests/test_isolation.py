import os
import threading
import time
from pathlib import Path

import pytest

from compile_study.core import vocab
from compile_study.measure.process import isolation
from compile_study.measure.process.isolation import Host

pytestmark = pytest.mark.unit


def test_inductor_cache_is_cold_when_fresh_and_warm_when_reused_and_holds_the_jobs_temporary_directory(tmp_path):
    """The job's environment points Inductor, Triton and the temporary directory (where Inductor keeps its C++
    precompiled header) into the cache; a cache holding only that directory is still cold."""
    cache = tmp_path / "cache"
    env, state = isolation.prepare_cache(cache, fresh=True)
    assert state == "cold" and env["TORCHINDUCTOR_CACHE_DIR"] == str(cache.resolve())
    assert env["TMPDIR"] == str(cache.resolve() / isolation.TEMP) and Path(env["TMPDIR"]).is_dir()
    assert isolation.prepare_cache(cache, fresh=False)[1] == "cold"  # only the temporary directory: cold
    (cache / "fxgraph").mkdir()
    assert isolation.prepare_cache(cache, fresh=False)[1] == "warm"
    assert isolation.prepare_cache(cache, fresh=True)[1] == "cold"
    assert [p.name for p in cache.iterdir()] == [isolation.TEMP]


def test_a_fresh_cache_starts_from_another_configurations_gemm_search_and_nothing_else(tmp_path):
    searched = tmp_path / "max-autotune"  # a cache after its cold run: search timings, graphs, Triton kernels
    (searched / isolation.SEARCH_RESULTS).mkdir(parents=True)
    (searched / isolation.SEARCH_RESULTS / "system-hash").write_text('{"cache": {"mm": {}}}')
    (searched / "fxgraph").mkdir()
    (searched / "triton" / "kernel").mkdir(parents=True)
    mine = tmp_path / "max-autotune-no-cudagraphs"
    (mine / "fxgraph").mkdir(parents=True)  # an earlier study's leftovers: a fresh repeat 0 empties them
    env, state = isolation.prepare_cache(mine, True, searched)
    assert state == vocab.SEARCH_SHARED and env["TORCHINDUCTOR_CACHE_DIR"] == str(mine.resolve())
    assert sorted(p.name for p in mine.iterdir()) == sorted([isolation.SEARCH_RESULTS, isolation.TEMP])  # no graphs, no kernels
    assert (mine / isolation.SEARCH_RESULTS / "system-hash").read_text() == '{"cache": {"mm": {}}}'
    # its later repeats find their own cache filled (warm) and copy nothing more
    (searched / isolation.SEARCH_RESULTS / "later").write_text("{}")
    assert isolation.prepare_cache(mine, False, searched)[1] == "warm"
    assert not (mine / isolation.SEARCH_RESULTS / "later").exists()
    # a search that left no results (a failed run, a CPU study): an honest cold start
    assert isolation.prepare_cache(tmp_path / "other", True, tmp_path / "nothing")[1] == "cold"


def test_timed_jobs_on_two_gpus_get_disjoint_cores(monkeypatch):
    allowed = set(range(8))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: allowed)
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cores: None)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS"):
        monkeypatch.setenv(var, "unset")
    first, second = isolation.pin_cores(0, 2), isolation.pin_cores(1, 2)
    assert first == [0, 1, 2, 3] and second == [4, 5, 6, 7] == isolation.core_share(1, 2)
    assert os.environ["TORCHINDUCTOR_COMPILE_THREADS"] == "4"
    assert isolation.job_threads(16, first) == 4 and isolation.job_threads(2, None) == 2


def test_a_host_has_a_lane_per_gpu_and_one_where_it_has_one_gpu_a_cluster_gave_one_or_a_cpu(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(isolation, "count_gpus", lambda: 2)
    assert isolation.lanes("cuda") == 2 and isolation.lanes("cpu") == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # a cluster gave the job its GPU
    assert isolation.lanes("cuda") == 1
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(isolation, "count_gpus", lambda: 0)
    assert isolation.lanes("cuda") == 1


def test_a_runs_load_and_timed_part_get_disjoint_halves_of_its_lanes_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert isolation.lane_cores(0, 1, False) == (None, None)  # one lane, no overlap: every core, unpinned
    load, timed = isolation.lane_cores(0, 1, True)
    assert timed == list(range(8)) and load == list(range(8, 16))
    load, timed = isolation.lane_cores(1, 2, True)  # GPU 1 of 2: cores 8-15, split
    assert timed == [8, 9, 10, 11] and load == [12, 13, 14, 15]
    assert isolation.lane_cores(1, 2, False) == (list(range(8, 16)),) * 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert isolation.lane_cores(0, 1, True) == ([1], [0])  # two cores: one each


def test_threads_are_bounded_before_torch_starts(monkeypatch):
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS"):
        monkeypatch.setenv(var, "unset")  # restored after the test
    isolation.bound_threads(3)
    assert os.environ["OMP_NUM_THREADS"] == os.environ["TORCHINDUCTOR_COMPILE_THREADS"] == "3"


class Diary:
    """Events of threads sharing a Host, in order, with an Event per name to start the next thread on."""

    def __init__(self) -> None:
        self.lock, self.events, self.seen = threading.Lock(), [], {}

    def note(self, what: str) -> None:
        with self.lock:
            self.events.append(what)
            self.seen.setdefault(what, threading.Event()).set()

    def after(self, what: str) -> None:
        with self.lock:
            seen = self.seen.setdefault(what, threading.Event())
        assert seen.wait(20), what

    def spans(self, kind: str) -> dict[str, tuple[int, int]]:
        """name -> (index of '<name> <kind>+', of '<name> <kind>-') in the diary."""
        at = {e: i for i, e in enumerate(self.events)}
        return {e.split()[0]: (at[e], at[e[:-1] + "-"]) for e in self.events if e.endswith(f" {kind}+")}


def overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def run(host: Host, diary: Diary, name: str, lanes: int = 1, hold_s: float = 0.2) -> None:
    """A timed run whose load may overlap timed work: its load slot, then its lane's timed hold."""
    with host.run_turn(lanes, overlap=True) as turn:
        diary.note(f"{name} load+")
        time.sleep(0.05)
        diary.note(f"{name} load-")
        turn.take_timed()
        diary.note(f"{name} timed+")
        time.sleep(hold_s)
        diary.note(f"{name} timed-")


def exclusive(host: Host, diary: Diary, name: str, lanes: int = 1, every: bool = False) -> None:
    with host.timed(lanes, every):
        diary.note(f"{name} timed+")
        time.sleep(0.1)
        diary.note(f"{name} timed-")


def started(*jobs) -> list[threading.Thread]:
    threads = [threading.Thread(target=fn, args=args) for fn, *args in jobs]
    for t in threads:
        t.start()
    return threads


def test_a_load_runs_beside_the_lanes_timed_part_one_at_a_time_and_never_beside_a_compile():
    host, diary = Host(), Diary()

    def compile_job():
        diary.after("c load+")  # queued while runs load and time
        with host.compiling(1):
            diary.note("compile timed+")
            diary.note("compile timed-")

    first = started((run, host, diary, "a", 1, 0.5))
    diary.after("a timed+")
    later = started((run, host, diary, "b"))
    diary.after("b load+")
    later += started((run, host, diary, "c"), (compile_job,))
    for t in first + later:
        t.join(30)
    timed, events = diary.spans("timed"), diary.events
    loads = {k: (v[0], events.index(f"{k} timed+")) for k, v in diary.spans("load").items()}  # slot held till timed
    assert overlap(loads["b"], timed["a"])  # the next run loaded while the first timed
    runs = [timed[k] for k in "abc"]
    assert not any(overlap(x, y) for i, x in enumerate(runs) for y in runs[i + 1:])  # one timed part at a time
    assert not any(overlap(x, y) for i, x in enumerate(loads.values()) for y in list(loads.values())[i + 1:])
    assert events.index("c load+") > events.index("b timed+")  # c waited for b's load slot
    assert not any(overlap(timed["compile"], s) for s in runs + list(loads.values()))


def test_exclusive_work_waits_for_the_lanes_load_and_keeps_new_loads_out():
    host, diary = Host(), Diary()
    threads = started((run, host, diary, "a", 1, 0.4))
    diary.after("a timed+")
    threads += started((run, host, diary, "b"))
    diary.after("b load+")
    threads += started((exclusive, host, diary, "check"))
    time.sleep(0.1)  # the check is queued: a run that comes now loads after it
    threads += started((run, host, diary, "c"))
    for t in threads:
        t.join(30)
    timed, events = diary.spans("timed"), diary.events
    for name in "abc":
        assert not overlap(timed["check"], (events.index(f"{name} load+"), timed[name][1]))
    assert events.index("c load+") > timed["check"][1]


def test_each_gpu_is_a_lane_of_its_own_and_every_lane_waits_for_all(monkeypatch):
    host, diary = Host(), Diary()
    threads = started((run, host, diary, "a", 2, 0.3), (run, host, diary, "b", 2, 0.3))
    diary.after("a timed+")
    diary.after("b timed+")
    threads += started((exclusive, host, diary, "all", 2, True))
    for t in threads:
        t.join(30)
    timed = diary.spans("timed")
    assert overlap(timed["a"], timed["b"])  # two GPUs: two timed parts at once, one on each
    assert not overlap(timed["all"], timed["a"]) and not overlap(timed["all"], timed["b"])
