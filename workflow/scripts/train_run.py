"""Snakemake shim for rule train_run: one configuration -> one JSON record.

    snakemake --cores all results/cpu/runs/static/fp32/default/module/bs32/r0.json
"""

from compile_study.core.clock import Clock

clock = Clock.since_process_start()  # first: the record's overhead_s counts from the process's creation

import os  # noqa: E402

from compile_study.core.logs import redirect_output, to_console  # noqa: E402
from compile_study.measure.isolation import bound_threads, claim_gpu, job_threads, use_inductor_cache  # noqa: E402

redirect_output(snakemake.log[0])
bound_threads(snakemake.threads)  # before torch is imported
gpu_lock = claim_gpu("resources/locks")  # held until the process ends
cache_state = use_inductor_cache(snakemake.params.cache_dir, fresh=snakemake.params.run["repeat"] == 0)
clock.lap("process_start_s")  # interpreter, Snakemake's preamble, the GPU claim and the cache set-up

with clock.part("imports_s"):
    from compile_study.aggregate.estimate import progress_message
    from compile_study.core.io import write_json_atomic
    from compile_study.core.record import RunConfig
    from compile_study.measure.profiling import write_empty_trace
    from compile_study.measure.run import model_config_for, run_and_record

data_dir = os.path.dirname(snakemake.input.data[0])
model_cfg = model_config_for(data_dir, snakemake.params.model)
cfg = RunConfig(**snakemake.params.run)
record = run_and_record(model_cfg, cfg, data_dir, snakemake.params.device, job_threads(snakemake.threads),
                        trace_path=snakemake.output.trace, clock=clock)
record["env"]["inductor_cache"] = cache_state
print(record["status"], record["error"] or "", record["metrics"].get("steady_step_ms"))
if not os.path.exists(snakemake.output.trace):  # no profiler pass ran: an empty, openable trace says why
    ok = record["status"] == "ok"
    why = "evidence is taken by another repeat" if ok else f"{record['status']}: {record['error']}"
    write_empty_trace(snakemake.output.trace, why)
write_json_atomic(snakemake.output.record, record)
to_console(progress_message(snakemake.params.records_glob, snakemake.params.expected_runs, snakemake.params.device))
