"""The jobs that make processes, as the rules call them: one job, one fresh process (measure/process/launch.py), its
output written here.

    rule cold_compile:  run: jobs.compile_run(params.job, ...)           -> launch.run(targets.compile_job, ...)
    rule parity:        run: jobs.parity_job(check_targets.parity, ...)  -> launch.run(check_targets.parity, ...)
    rule train_run:     run: jobs.train_run(params, ...)                 -> launch.run(targets.run_job, ...)

Each runs in a thread of Snakemake's own process and never imports torch. A job of the compile phase takes a
compile slot (compile_setup); a timed job waits for a host without compiles and holds a lane, a GPU where the host
has several (isolation.Host: job_setup for work that holds its lane whole; run_setup for a run, whose process may
load beside the lane's timed run and times after it, launch.run's gate); waiting is booked as `gpu_wait_s`, and
under a call's time limit a job is refused once it has waited where it would not end in time (in_time). Each
readies the Inductor cache, has the launcher make the process,
and writes the output from what the process sends back. A run's record is written last, atomically, with
where its wall time went from the job's start to that write (`overhead_s`, record.OVERHEAD): the parts its
process booked, how long its process took to exit (`teardown_s`) and the record's own writing (`record_s`).
A process that dies without an answer leaves a record of the failure; an interrupted one leaves nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from compile_study.core import compile_record, disturbance, layout, record
from compile_study.core.calls import deadline, env
from compile_study.core.calls.clock import Clock
from compile_study.core.io import write_empty_trace, write_json_atomic
from compile_study.measure import targets
from compile_study.measure.process import isolation, launch


@contextlib.contextmanager
def job_setup(log: str, threads: int, device: str, clock: Clock, cache_dir: str | None = None, fresh: bool = False,
              search_from: str | None = None, every: bool = False, expected_s: Callable[[], float] | None = None,
              what: str = ""):
    """-> (launch.Setup, the Inductor cache's state) for one job of exclusive timed work, holding its lane (its GPU
    and its share of the cores; `every`: every lane) with nothing beside it (isolation.Host.timed) until the block
    ends; the wait is booked as `gpu_wait_s`, and under a call's time limit the job is refused after it where it
    would not end in time (in_time). `search_from`: a cache whose GEMM search a fresh cache starts from
    (isolation.prepare_cache)."""
    lanes = isolation.lanes(device)
    with contextlib.ExitStack() as held:
        with clock.part("gpu_wait_s"):
            lane = held.enter_context(isolation.HOST.timed(lanes, every))
        in_time(expected_s, what)
        setup = (lane_setup(log, threads, lane, 1, None) if every
                 else lane_setup(log, threads, lane, lanes, isolation.lane_cores(lane, lanes, False)[1]))
        state = None
        if cache_dir is not None:
            cache_env, state = isolation.prepare_cache(cache_dir, fresh, search_from)
            setup.env |= cache_env
        yield setup, state


def lane_setup(log: str, threads: int, lane: int, lanes: int, cores: list[int] | None) -> launch.Setup:
    """A job's process on `lane` of `lanes` (its GPU where the host has several), pinned to `cores` (None: all),
    with torch's threads bounded to them."""
    setup = launch.Setup(log=log, threads=isolation.job_threads(threads, cores), cores=cores)
    if lanes > 1:
        setup.env["CUDA_VISIBLE_DEVICES"] = str(lane)
    setup.env |= isolation.thread_env(setup.threads)
    return setup


@contextlib.contextmanager
def compile_setup(log: str, device: str, clock: Clock, cores_per_compile: int, alone: bool,
                  slots: int | None = None, expected_s: Callable[[], float] | None = None, what: str = ""):
    """-> (launch.Setup, the slot: isolation.Host.compiling) for a job of the compile phase: a compile slot's cores
    (all of them where it runs alone), on no timed job's host; on a host with several GPUs, slot i on GPU i mod n.
    Under a call's time limit the job is refused after its wait where it would not end in time (in_time)."""
    with contextlib.ExitStack() as held:
        with clock.part("gpu_wait_s"):
            slot = held.enter_context(isolation.HOST.compiling(cores_per_compile, alone, slots))
        in_time(expected_s, what)
        setup = launch.Setup(log=log, threads=len(slot["cores"]), cores=slot["cores"])
        setup.env |= isolation.thread_env(setup.threads)
        gpus = isolation.count_gpus() if device == "cuda" else 0
        if gpus > 1 and "CUDA_VISIBLE_DEVICES" not in os.environ:
            setup.env["CUDA_VISIBLE_DEVICES"] = str(slot["index"] % gpus)
        yield setup, slot


def compile_run(params, data_dir: str, record_path: str, log: str, progress: Callable[[], str] | None = None,
                expected_s: Callable[[], float] | None = None) -> dict:
    """Rule cold_compile (and portable_start): one cold compile (or portable start) of a configuration in a fresh
    process on a compile slot, from an empty cache (params: run, compile {index, alone, cores_per_compile, slots,
    threads, start, inference}, cache_dir, search_cache, artifacts {save or load: path}, model, device) -> its record,
    written (and returned). A cache of its own beyond the first cold compile's is removed afterwards.
    `expected_s`: its estimated seconds, asked only where the call has a time limit (core/calls/deadline.py)."""
    in_time(expected_s, record_path)
    clock = Clock()
    run, plan, device = dict(params["run"]), dict(params["compile"]), params["device"]
    host = env.host_facts(device)
    slots = plan.get("slots")  # None: as many as the cores hold
    with compile_setup(log, device, clock, plan["cores_per_compile"], plan["alone"], slots, expected_s,
                       record_path) as (setup, slot):
        cache_env, state = isolation.prepare_cache(params["cache_dir"], True, params.get("search_cache"))
        setup.env |= cache_env
        if plan.get("threads"):  # the timed runs' torch threads on the slot's cores: the kernels they will load
            setup.threads = plan["threads"]
            setup.env |= isolation.thread_env(setup.threads)
        block = {"index": plan["index"], "alone": plan["alone"], "slots": slot["slots"], "cores": slot["cores"],
                 "threads": setup.threads, "inductor_cache": state, "start": plan.get("start", "cold"),
                 "inference": bool(plan.get("inference"))}
        kwargs = {"model": dict(params["model"]), "run": run, "data_dir": data_dir, "device": device,
                  "threads": setup.threads, "host": host, "compile": block, "artifacts": params.get("artifacts")}
        if plan["index"] == 0 and block["start"] == "cold":  # its structured trace kept (core/layout.py)
            files = layout.compile_trace_files(record_path)
            kwargs["trace"] = {"trace_path": files["trace"], "report_dir": files["tlparse"]}
        outcome = launch.run(targets.compile_job, kwargs, setup, clock)
    if plan["index"] > 0 or block["start"] != "cold":
        shutil.rmtree(params["cache_dir"], ignore_errors=True)  # only the first compile's cache is used again
    if outcome.answered:
        rec = outcome.value
    else:  # the process died: this compile's outcome is that failure
        rec = compile_record.new(record.RunConfig(**run), dict(params["model"]), host, block)
        rec |= {"status": "error", "error": outcome.crash}
    rec["compile"]["at_once"] = slot["at_once"]  # final now that the compile has ended
    finish(rec, outcome.clock, record_path, progress)
    return rec


def train_run(params, data_dir: str, record_path: str, trace_path: str, log: str, threads: int,
              progress: Callable[[], str] | None = None, way: str | None = None,
              expected_s: Callable[[], float] | None = None) -> dict:
    """Rule train_run: one configuration's run in a fresh process -> its record, written (and returned). Where the
    study lets loads overlap timed work (params `overlap`), its process loads beside the lane's timed run and times
    once that run has ended (run_setup). `expected_s`: the run's estimated seconds, asked only where the call has a
    time limit (core/calls/deadline.py)."""
    in_time(expected_s, record_path)
    clock = Clock()
    run, device = dict(params["run"]), params["device"]
    host = env.host_facts(device)
    # every repeat starts from the cache its configuration's first cold compile filled (rule cold_compile): warm
    with run_setup(log, threads, device, clock, params, expected_s, record_path) as (setup, cache, gate):
        kwargs = {"model": dict(params["model"]), "run": run, "data_dir": data_dir, "device": device,
                  "threads": setup.threads, "trace_path": trace_path, "host": host}
        outcome = redo_disturbed(kwargs, setup, clock, way, params, cache, record_path, gate)
    if outcome.answered:
        rec = outcome.value
    else:  # the process died: its configuration's outcome is that failure
        rec = record.new(record.RunConfig(**run), dict(params["model"]), host)
        rec |= {"status": "error", "error": outcome.crash}
        write_empty_trace(trace_path, f"error: {outcome.crash}")
    rec["env"] |= {"inductor_cache": cache, "launcher": outcome.way}
    finish(rec, outcome.clock, record_path, progress)
    return rec


@contextlib.contextmanager
def run_setup(log: str, threads: int, device: str, clock: Clock, params, expected_s: Callable[[], float] | None,
              record_path: str):
    """-> (launch.Setup, the Inductor cache's state, the gate) for a timed run, holding its turn on a lane
    (isolation.Host.run_turn) until the block ends. Where loads overlap timed work, the process starts on the lane's
    load cores while the lane's timed run may still time; the gate (launch.run's, called when the process is
    ready: measure/process/handover.py) waits for the lane's timed hold and sends the process to the timed cores. Without
    overlap, the lane is held whole from the start and the gate lets the process go at once. Waits are booked as
    `gpu_wait_s` (the gate's by the process). Under a call's time limit (core/calls/deadline.py) a run is not started
    where it would not end before it even were its load to wait for the whole of the lane's timed run (which says
    when it expects to end), and its timed part is not started where it would not end in time after its load."""
    lanes, overlap = isolation.lanes(device), bool(params.get("overlap"))
    with contextlib.ExitStack() as held:
        with clock.part("gpu_wait_s"):
            turn = held.enter_context(isolation.HOST.run_turn(lanes, overlap))
        in_time(expected_s and (lambda: turn.ahead_s() + expected_s()), record_path)
        load, timed = isolation.lane_cores(turn.lane, lanes, overlap)
        setup = lane_setup(log, threads, turn.lane, lanes, load)
        setup.threads = isolation.job_threads(threads, timed)  # the timed part's, from the start (Inductor's CPU
        setup.env |= isolation.thread_env(setup.threads)  # kernels, and their cache keys, depend on them)

        def gate(said: dict) -> dict:
            turn.take_timed()
            if expected_s is not None and deadline.seconds_left() is not None:
                timed_s = max(0.0, expected_s() - said["load_s"])  # the run's estimate less what its load took
                in_time(lambda: timed_s, f"{record_path} (its timed part)")
                turn.expect_end(time.time() + timed_s)
            setup.cores = timed  # a redo of the run loads on the timed cores, which it holds by then
            return {"cores": timed, "threads": setup.threads, "overlap": overlap, "lane": turn.lane}

        cache_env, state = isolation.prepare_cache(params["cache_dir"], False)
        setup.env |= cache_env
        yield setup, state, gate


def redo_disturbed(kwargs: dict, setup: launch.Setup, clock: Clock, way: str | None, params, cache: str | None,
                   record_path: str, gate: launch.Gate | None = None) -> launch.Outcome:
    """The run's process, started again while its record is disturbed (core/disturbance.py, config `disturbance`),
    at most `redos` times -> the last attempt's outcome. Its record keeps the judgement (`disturbed`: None, or the
    evidence where it stayed disturbed) and every earlier attempt's record whole (`earlier_attempts`): nothing
    measured is lost, and the summary reads only the last. A redo starts as the first attempt did: a cold run's
    Inductor cache is emptied again. Its clock runs on from the job's start, the earlier attempts booked `redo_s`.
    Under a call's time limit (core/calls/deadline.py) a redo that would not end before it is not started: the
    disturbed record is kept as it is rather than lost with a redo cut short. `gate`: launch.run's."""
    limits = disturbance.Limits.of(params.get("disturbance"))
    before, earlier, started = dict(clock.parts), [], clock.elapsed()
    while True:
        outcome = launch.run(targets.run_job, kwargs, setup, clock, way, gate)
        if not outcome.answered:
            return outcome
        rec = outcome.value
        rec["disturbed"] = disturbance.judge(rec, limits)
        if rec["disturbed"] is None or len(earlier) == limits.redos or not _time_for_redo(
                outcome.clock.elapsed() - started, record_path):
            rec["earlier_attempts"] = earlier
            return outcome
        earlier.append(rec | {"env": rec["env"] | {"inductor_cache": cache, "launcher": outcome.way}})
        print(f"{record_path}: disturbed ({disturbance.describe(rec['disturbed'])}); redoing it, "
              f"{len(earlier)} of at most {limits.redos}", flush=True)
        started = outcome.clock.elapsed()
        clock = Clock(outcome.clock.origin, before | {"redo_s": started - sum(before.values())})


def _time_for_redo(attempt_s: float, record_path: str) -> bool:
    """Whether a redo, taking about as long as the attempt before it, ends before the call's time limit (if any)."""
    left = deadline.seconds_left()
    if left is None or attempt_s <= left:
        return True
    print(f"{record_path}: disturbed, and not redone: a redo takes about {attempt_s:.0f} s and the call's time limit "
          f"comes in {max(left, 0):.0f} s; the record keeps its flag", flush=True)
    return False


def finish(rec: dict, clock: Clock, record_path: str, progress: Callable[[], str] | None) -> None:
    """Write the record, the job's last act, with where its time went (the final write, milliseconds, aside)."""
    with clock.part("record_s"):
        rec["metrics"]["job_window_unix"] = [round(time.time() - clock.elapsed(), 3), None]
    rec["metrics"]["overhead_s"] = clock.breakdown(record.OVERHEAD)
    rec["metrics"]["job_window_unix"][1] = round(time.time(), 3)
    write_json_atomic(record_path, rec)
    if progress is not None:
        print(progress(), flush=True)


def in_time(expected_s: Callable[[], float] | None, what: str) -> None:
    """Under a call's time limit, a job whose estimate (`expected_s`, asked only then) would not end before it is
    not started (core/calls/deadline.py PastDeadline): nothing written, the next call runs it."""
    if deadline.seconds_left() is not None and expected_s is not None:
        deadline.check(expected_s(), what)


def result_job(target: launch.Target, kwargs: dict, out_path: str, log: str, threads: int, device: str,
               cache_dir: str | None = None, host_env: bool = False,
               expected_s: Callable[[], float] | None = None) -> None:
    """Rules measure_peak, mlp_claim: target's dict (with the environment if asked), as JSON. `expected_s`: its
    estimated seconds, asked only where the call has a time limit (core/calls/deadline.py)."""
    in_time(expected_s, out_path)
    clock = Clock()
    with job_setup(log, threads, device, clock, cache_dir, expected_s=expected_s, what=out_path) as (setup, _):
        outcome = launch.run(target, kwargs | ({"host": env.host_facts(device)} if host_env else {}), setup, clock)
    if not outcome.answered:
        raise RuntimeError(f"{launch.name_of(target)}: {outcome.crash} (see {log})")
    write_json_atomic(out_path, outcome.value)


def parity_job(target: launch.Target, check: dict, out_path: str, log: str, cores_per_compile: int, device: str,
               expected_s: Callable[[], float] | None = None) -> None:
    """Rule parity: one check (check: {"kwargs", "cache_dir"}), a fresh process on its Inductor cache, as JSON. It
    times nothing: it runs in the compile phase, on a compile slot, beside compiles (compile_setup)."""
    in_time(expected_s, out_path)
    clock = Clock()
    with compile_setup(log, device, clock, cores_per_compile, False, None, expected_s, out_path) as (setup, _):
        setup.env |= isolation.prepare_cache(check["cache_dir"], False)[0]
        outcome = launch.run(target, check["kwargs"], setup, clock)
    if not outcome.answered:
        raise RuntimeError(f"{launch.name_of(target)}: {outcome.crash} (see {log})")
    write_json_atomic(out_path, outcome.value)


class PlugRefused(Exception):
    """The configured model failed a check: the study stops before its first timed run."""


def model_job(data_dir: str, model: dict, device: str, out_path: str, log: str, threads: int,
              expected_s: Callable[[], float] | None = None) -> None:
    """Rule check_model: the model tried in a fresh process; a bad plug ends the study with its message."""
    in_time(expected_s, out_path)
    clock = Clock()
    with job_setup(log, threads, device, clock, expected_s=expected_s, what=out_path) as (setup, _):
        outcome = launch.run(targets.model_check, {"data_dir": data_dir, "model": dict(model), "device": device},
                             setup, clock)
    if not outcome.answered:
        raise RuntimeError(f"check_model: {outcome.crash} (see {log})")
    if "error" in outcome.value:
        raise PlugRefused(f"check_model: {outcome.value['error']}")  # (SystemExit in a job's thread hangs Snakemake)
    print({k: v for k, v in outcome.value["facts"].items() if k != "config"})
    write_json_atomic(out_path, outcome.value["facts"])


def check_job(check: str, target: launch.Target, data_dir: str, out_path: str, model: dict, log: str, threads: int,
              device: str, expected_s: Callable[[], float] | None = None, warm_from: list[str] = (),
              every: bool = False) -> None:
    """Rule method_check: a check's main(data_dir, out_path, model) in a fresh process (it writes its output).
    A check that places its own processes on the GPUs (`every`: concurrency) holds every lane and pins nothing.
    `warm_from`: Inductor caches the compile phase filled, merged into a scratch cache of the check's own, which
    its compiles then find."""
    clock = Clock()
    cache = None
    if warm_from:
        cache = Path(out_path).with_name(f".{Path(out_path).stem}-cache")
        shutil.rmtree(cache, ignore_errors=True)
        for source in warm_from:  # cache entries are named by their keys: one tree holds them all
            shutil.copytree(source, cache, dirs_exist_ok=True)
    with job_setup(log, threads, device, clock, str(cache) if cache else None, every=every, expected_s=expected_s,
                   what=out_path) as (setup, _):
        outcome = launch.run(target,
                             {"data_dir": data_dir, "out_path": out_path, "model": dict(model)}, setup, clock)
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
    if not outcome.answered or not Path(out_path).is_file():
        raise RuntimeError(f"method check {check}: {outcome.crash or 'no output written'} (see {log})")
