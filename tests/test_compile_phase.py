"""The compile phase: cold compiles several at once on disjoint cores, never beside a timed job, each in a record
of its own; a study killed during it resumes with nothing lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from compile_study.core import compile_record
from compile_study.core.layout import Layout
from compile_study.measure.process.isolation import Host

from .test_resilience import tiny_study


@pytest.mark.unit
def test_compiles_share_the_host_with_each_other_and_timed_work_with_nothing():
    host, log, lock = Host(), [], threading.Lock()

    def note(what):
        with lock:
            log.append((time.perf_counter(), what))

    def compile_job(n):
        with host.compiling(1) as slot:
            note(("compile+", n, tuple(slot["cores"])))
            time.sleep(0.3)
            note(("compile-", n, slot["at_once"]))

    def timed_job():
        with host.timed():
            note(("timed+",))
            time.sleep(0.2)
            note(("timed-",))

    cores = len(os.sched_getaffinity(0))
    jobs = [threading.Thread(target=compile_job, args=(i,)) for i in range(min(cores, 2))]
    jobs.insert(1, threading.Thread(target=timed_job))
    for j in jobs:
        j.start()
        time.sleep(0.05)
    for j in jobs:
        j.join()
    events = [e for _, e in sorted(log)]
    inside, timing = 0, False
    for e in events:  # never a compile while timed work runs, nor timed work while a compile runs
        if e[0] == "compile+":
            assert not timing
            inside += 1
        elif e[0] == "compile-":
            inside -= 1
        elif e[0] == "timed+":
            assert inside == 0
            timing = True
        else:
            timing = False
    starts = [e for e in events if e[0] == "compile+"]
    assert len({e[2] for e in starts}) == len(starts)  # disjoint cores while they overlap (one core each)


@pytest.mark.unit
def test_a_compile_slot_counts_the_invocations_slots_within_the_hosts_cores():
    host, cores = Host(), len(os.sched_getaffinity(0))
    with host.compiling(1, slots=1) as slot:  # e.g. --cores 2 at two cores a compile on a host of any size
        assert slot["slots"] == 1 and len(slot["cores"]) == 1
    with host.compiling(1, slots=10 * cores) as slot:  # never more than the cores hold
        assert slot["slots"] == cores
    with host.compiling(1) as slot:  # unsaid: as many as the cores hold
        assert slot["slots"] == cores
    with host.compiling(1, alone=True, slots=5) as slot:  # a GEMM search: alone, on every core
        assert slot["slots"] == 1 and len(slot["cores"]) == cores


def windows(root: Path, pattern: str) -> list[tuple[float, float, str]]:
    out = []
    for p in sorted(root.glob(pattern)):
        w = json.loads(p.read_text())["metrics"]["job_window_unix"]
        out.append((w[0], w[1], str(p.relative_to(root))))
    return out


@pytest.mark.dag
def test_the_compile_phase_never_overlaps_a_timed_job_and_a_killed_study_resumes_with_nothing_lost(tmp_path):
    """One compiled configuration, three cold compiles two at once (one core each) and a portable start; killed
    after the first compile, the same command resumes with nothing lost. The portable start, on an empty cache
    fed the first compile's artifacts, traces and lowers no graph again (its FX-graph and AOTAutograd caches hit),
    and its record says what the artifacts held."""
    import yaml

    cmd = tiny_study(tmp_path, [8], repeats=2)
    cfg = yaml.safe_load((tmp_path / "config.yaml").read_text())
    cfg["grids"]["cpu"][0]["compile_mode"] = ["eager", "default"]
    cfg["compile_phase"] = {"cpu": {"n_cold": 3, "n_portable": 1, "cores_per_compile": 1}}  # 2 cores: two at once
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    root = tmp_path / "results/cpu"
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 900
    while time.time() < deadline and len(list(root.glob("compiles/**/c[0-9]*.json"))) < 1:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # in the compile phase: Snakemake, the launcher's server, the compiles
    proc.wait()
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in root.glob("compiles/**/c[0-9]*.json")}
    assert 1 <= len(before) < 3 and not list(root.glob("runs/**/r*.json"))

    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, cwd=tmp_path)  # the same command
    assert res.returncode == 0, res.stderr[-3000:]
    for p, (content, mtime) in before.items():  # nothing compiled before the kill was lost or redone
        assert p.read_bytes() == content and p.stat().st_mtime_ns == mtime
    compiles = windows(root, "compiles/**/[cp][0-9]*.json")
    timed = windows(root, "runs/**/r*.json")
    assert len(compiles) == 4 and len(timed) == 4
    for c0, c1, c in compiles:
        for t0, t1, t in timed:
            assert c1 <= t0 or t1 <= c0, f"{c} ran beside the timed {t}"
    recs = [compile_record.read(p) for p in sorted(root.glob("compiles/**/c[0-9]*.json"))]
    for rec in recs:  # the record's shape: how it ran and what the compiler did
        assert rec["kind"] == "cold_compile" and rec["status"] == "ok" and rec["compile"]["start"] == "cold"
        assert set(compile_record.COMPILE) - {"trace"} <= set(rec["compile"])
        assert ("trace" in rec["compile"]) == (rec["compile"]["index"] == 0)  # a first cold compile's trace only
        assert rec["compile"]["slots"] == 2  # --cores 2 over a core each, on a host of any size
        assert len(rec["compile"]["cores"]) == 1 and rec["compile"]["inductor_cache"] == "cold"
        m = rec["metrics"]
        assert m["graphs_compiled"] >= 1 and m["cold_compile_s"] == pytest.approx(m["epoch1_s"] - m["epoch2_s"])
        assert m["cold_compile_s"] > 0 and m["overhead_s"]["total_s"] > m["cold_compile_s"]
        assert m["fx_cache_misses"] >= 1 and rec["compile"]["threads"] == 2  # compiled, as the timed runs' threads
    assert max(r["compile"]["at_once"] for r in recs) == 2  # two compiles did run at once
    first = recs[0]["metrics"]  # c0 saved the artifacts: the graph pair (AOTAutograd) and Inductor's graphs
    assert first["artifacts_bytes"] > 0 and first["artifacts"]["inductor"] >= 1 and first["artifacts"]["aot_autograd"] >= 1
    (portable,) = [compile_record.read(p) for p in root.glob("compiles/**/p[0-9]*.json")]
    m = portable["metrics"]
    assert portable["status"] == "ok" and portable["compile"]["start"] == "portable", portable.get("error")
    assert portable["compile"]["inductor_cache"] == "cold"  # its own cache was empty ...
    assert m["artifacts_bytes"] == first["artifacts_bytes"] and m["artifacts"] == first["artifacts"]  # ... then fed
    # nothing traced or lowered again (AOTAutograd's and Inductor's caches hit); on the CPU the artifacts carry the
    # kernels' C++ source, which is compiled again (the record's time says what that costs: no assertion on time)
    assert m["fx_cache_misses"] == 0 < first["fx_cache_misses"] and m["fx_cache_hits"] >= 1
    assert m["aot_cache_hits"] >= 1 and m["aot_cache_misses"] == 0 < first["aot_cache_misses"]
    assert m["artifacts_load_s"] > 0 and m["overhead_s"]["compile_s"] >= m["artifacts_load_s"]  # the load booked
    runs = [json.loads(p.read_text()) for p in root.glob("runs/static/fp32/default/**/r*.json")]
    assert {r["env"]["inductor_cache"] for r in runs} == {"warm"}  # every timed run starts from the cache
    for r in runs:  # ... and finds every graph it trains in it: it compiles nothing on the timed path
        assert r["metrics"]["fx_cache_misses"] == 0 and r["metrics"]["fx_cache_hits"] >= 1, r["metrics"]
    layout = Layout(str(root))
    assert Path(layout.summary).is_file() and Path(layout.paper("md")).is_file()
