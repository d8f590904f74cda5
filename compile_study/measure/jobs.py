"""The timed jobs as the rules call them: one job, one fresh process (measure/launch.py), its output written here.

    rule train_run:  run: jobs.train_run(params, input.data[0], output.record, output.trace, log[0], threads, ...)
    rule parity:     run: jobs.parity_jobs("compile_study.checks.parity:job", params.checks, threads, ...)

Each runs in a thread of Snakemake's own process and never imports torch: it claims a GPU where the host has
several (waiting is booked as `gpu_wait_s`), readies the Inductor cache, has the launcher make the process,
and writes the output from what the process sends back. A run's record is written last, atomically, with
where its wall time went from the job's start to that write (`overhead_s`, record.OVERHEAD): the parts its
process booked, how long its process took to exit (`teardown_s`) and the record's own writing (`record_s`).
A process that dies without an answer leaves a record of the failure; an interrupted one leaves nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from compile_study.core import deadline, disturbance, env, record
from compile_study.core.clock import Clock
from compile_study.core.io import write_empty_trace, write_json_atomic
from compile_study.measure import isolation, launch

LOCKS = "resources/locks"  # one lock per GPU on a host with several (isolation.take_gpu)
RUN = "compile_study.measure.run:run_job"


@contextlib.contextmanager
def job_setup(log: str, threads: int, device: str, clock: Clock, cache_dir: str | None = None, fresh: bool = False,
              search_from: str | None = None):
    """-> (launch.Setup, the Inductor cache's state) for one job, holding its GPU until the block ends.
    `search_from`: a cache whose GEMM search a fresh cache starts from (isolation.prepare_cache)."""
    with clock.part("gpu_wait_s"):
        gpu = isolation.take_gpu(LOCKS) if device == "cuda" else None
    try:
        setup = launch.Setup(log=log, threads=threads)
        if gpu is not None:
            _, index, gpus = gpu
            setup.cores = isolation.core_share(index, gpus)
            setup.env["CUDA_VISIBLE_DEVICES"] = str(index)
        setup.threads = isolation.job_threads(threads, setup.cores)
        setup.env |= isolation.thread_env(setup.threads)
        state = None
        if cache_dir is not None:
            cache_env, state = isolation.prepare_cache(cache_dir, fresh, search_from)
            setup.env |= cache_env
        yield setup, state
    finally:
        if gpu is not None:
            gpu[0].release()


def train_run(params, data_dir: str, record_path: str, trace_path: str, log: str, threads: int,
              progress: Callable[[], str] | None = None, way: str | None = None,
              expected_s: Callable[[], float] | None = None) -> dict:
    """Rule train_run: one configuration's run in a fresh process -> its record, written (and returned).
    `expected_s`: the run's estimated seconds, asked only where the call has a time limit (core/deadline.py)."""
    if deadline.seconds_left() is not None and expected_s is not None:
        deadline.check(expected_s(), record_path)  # not started: nothing written, the next call runs it
    clock = Clock()
    run, device = dict(params["run"]), params["device"]
    host = env.host_facts(device)
    fresh = run["repeat"] == 0
    with job_setup(log, threads, device, clock, params["cache_dir"], fresh, params.get("search_cache")) as (setup, cache):
        kwargs = {"model": dict(params["model"]), "run": run, "data_dir": data_dir, "device": device,
                  "threads": setup.threads, "trace_path": trace_path, "host": host}
        outcome = redo_disturbed(kwargs, setup, clock, way, params, cache, record_path)
    if outcome.answered:
        rec = outcome.value
    else:  # the process died: its configuration's outcome is that failure
        rec = record.new(record.RunConfig(**run), dict(params["model"]), host)
        rec |= {"status": "error", "error": outcome.crash}
        write_empty_trace(trace_path, f"error: {outcome.crash}")
    rec["env"] |= {"inductor_cache": cache, "launcher": outcome.way}
    finish(rec, outcome.clock, record_path, progress)
    return rec


def redo_disturbed(kwargs: dict, setup: launch.Setup, clock: Clock, way: str | None, params, cache: str | None,
                   record_path: str) -> launch.Outcome:
    """The run's process, started again while its record is disturbed (core/disturbance.py, config `disturbance`),
    at most `redos` times -> the last attempt's outcome. Its record keeps the judgement (`disturbed`: None, or the
    evidence where it stayed disturbed) and every earlier attempt's record whole (`earlier_attempts`): nothing
    measured is lost, and the summary reads only the last. A redo starts as the first attempt did: a cold run's
    Inductor cache is emptied again. Its clock runs on from the job's start, the earlier attempts booked `redo_s`.
    Under a call's time limit (core/deadline.py) a redo that would not end before it is not started: the
    disturbed record is kept as it is rather than lost with a redo cut short."""
    limits = disturbance.Limits.of(params.get("disturbance"))
    before, earlier, started = dict(clock.parts), [], clock.elapsed()
    while True:
        outcome = launch.run(RUN, kwargs, setup, clock, way)
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
        if params.get("cache_dir") is not None:
            cache = isolation.prepare_cache(params["cache_dir"], kwargs["run"]["repeat"] == 0,
                                            params.get("search_cache"))[1]


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


def result_job(target: str, kwargs: dict, out_path: str, log: str, threads: int, device: str,
               cache_dir: str | None = None, host_env: bool = False) -> None:
    """Rules parity, measure_peak, mlp_claim: target's dict (with the environment if asked), as JSON."""
    clock = Clock()
    with job_setup(log, threads, device, clock, cache_dir) as (setup, _):
        outcome = launch.run(target, kwargs | ({"host": env.host_facts(device)} if host_env else {}), setup, clock)
    if not outcome.answered:
        raise RuntimeError(f"{target}: {outcome.crash} (see {log})")
    write_json_atomic(out_path, outcome.value)


def parity_jobs(target: str, checks: list[dict], threads: int, device: str) -> None:
    """Rule parity: every check at once, each a fresh process of its own on its own Inductor cache, sharing the
    job's GPU and cores (they time nothing; the job holds the timed slot, so no timed job runs meanwhile).
    `checks`: [{"kwargs", "output", "log", "cache_dir"}]. Each output is written as its process answers; a check
    that fails (launch.ChildError) or whose process dies without an answer fails the job once all have ended."""
    clock = Clock()
    with job_setup(checks[0]["log"], threads, device, clock) as (setup, _):

        def one(check: dict) -> launch.Outcome:
            own = dataclasses.replace(setup, log=check["log"], env=setup.env | isolation.prepare_cache(check["cache_dir"], False)[0])
            outcome = launch.run(target, check["kwargs"], own)
            if outcome.answered:
                write_json_atomic(check["output"], outcome.value)
            return outcome

        with ThreadPoolExecutor(len(checks)) as pool:
            outcomes = list(pool.map(one, checks))
    failed = [f"{c['output']}: {o.crash} (see {c['log']})" for c, o in zip(checks, outcomes) if not o.answered]
    if failed:
        raise RuntimeError(f"{target}: " + "; ".join(failed))


class PlugRefused(Exception):
    """The configured model failed a check: the study stops before its first timed run."""


def model_job(data_dir: str, model: dict, device: str, out_path: str, log: str, threads: int) -> None:
    """Rule check_model: the model tried in a fresh process; a bad plug ends the study with its message."""
    clock = Clock()
    with job_setup(log, threads, device, clock) as (setup, _):
        outcome = launch.run("compile_study.core.plug_check:job", {"data_dir": data_dir, "model": dict(model),
                                                                    "device": device}, setup, clock)
    if not outcome.answered:
        raise RuntimeError(f"check_model: {outcome.crash} (see {log})")
    if "error" in outcome.value:
        raise PlugRefused(f"check_model: {outcome.value['error']}")  # (SystemExit in a job's thread hangs Snakemake)
    print({k: v for k, v in outcome.value["facts"].items() if k != "config"})
    write_json_atomic(out_path, outcome.value["facts"])


def check_job(check: str, data_dir: str, out_path: str, model: dict, log: str, threads: int, device: str) -> None:
    """Rule method_check: a check's main(data_dir, out_path, model) in a fresh process (it writes its output).
    The concurrency check places its own processes on the GPUs, so its job takes none."""
    clock = Clock()
    gpu_device = "cpu" if check == "concurrency" else device
    with job_setup(log, threads, gpu_device, clock) as (setup, _):
        outcome = launch.run(f"compile_study.checks.{check}:main",
                             {"data_dir": data_dir, "out_path": out_path, "model": dict(model)}, setup, clock)
    if not outcome.answered or not Path(out_path).is_file():
        raise RuntimeError(f"method check {check}: {outcome.crash or 'no output written'} (see {log})")
