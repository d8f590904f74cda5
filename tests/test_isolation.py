import os

import pytest

from compile_study.core import vocab
from compile_study.measure import isolation

pytestmark = pytest.mark.unit


def test_inductor_cache_is_cold_when_fresh_and_warm_when_reused(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    cache = tmp_path / "cache"
    assert isolation.use_inductor_cache(cache, fresh=True) == "cold"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(cache.resolve())
    (cache / "fxgraph").mkdir()
    assert isolation.use_inductor_cache(cache, fresh=False) == "warm"
    assert isolation.use_inductor_cache(cache, fresh=True) == "cold" and not any(cache.iterdir())


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
    assert sorted(p.name for p in mine.iterdir()) == [isolation.SEARCH_RESULTS]  # no graphs, no kernels
    assert (mine / isolation.SEARCH_RESULTS / "system-hash").read_text() == '{"cache": {"mm": {}}}'
    # its later repeats find their own cache filled (warm) and copy nothing more
    (searched / isolation.SEARCH_RESULTS / "later").write_text("{}")
    assert isolation.prepare_cache(mine, False, searched)[1] == "warm"
    assert not (mine / isolation.SEARCH_RESULTS / "later").exists()
    # a search that left no results (a failed run, a CPU study): an honest cold start
    assert isolation.prepare_cache(tmp_path / "other", True, tmp_path / "nothing")[1] == "cold"


def test_two_timed_jobs_never_share_a_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(isolation, "count_gpus", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    first = isolation.take_gpu(tmp_path)
    second = isolation.take_gpu(tmp_path)  # gpu0 is held: the next job gets gpu1
    assert (first[1:], second[1:]) == ((0, 2), (1, 2))
    first[0].release()
    third = isolation.take_gpu(tmp_path)  # gpu0 free again
    assert third[1] == 0 and "CUDA_VISIBLE_DEVICES" not in os.environ  # the child is told, not this process
    second[0].release()
    third[0].release()


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


def test_single_gpu_or_cpu_hosts_claim_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(isolation, "count_gpus", lambda: 1)
    assert isolation.take_gpu(tmp_path) is None
    monkeypatch.setattr(isolation, "count_gpus", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # a cluster gave the job its GPU
    assert isolation.take_gpu(tmp_path) is None


def test_threads_are_bounded_before_torch_starts(monkeypatch):
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS"):
        monkeypatch.setenv(var, "unset")  # restored after the test
    isolation.bound_threads(3)
    assert os.environ["OMP_NUM_THREADS"] == os.environ["TORCHINDUCTOR_COMPILE_THREADS"] == "3"
