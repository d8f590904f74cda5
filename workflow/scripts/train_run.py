"""Snakemake shim for rule train_run: one configuration -> one JSON record.

    snakemake --cores all results/cpu/runs/static/fp32/default/module/bs32/r0.json
"""

import os

from compile_study.isolation import bound_threads, claim_gpu, use_inductor_cache
from compile_study.logs import redirect_output

redirect_output(snakemake.log[0])
bound_threads(snakemake.threads)  # before torch is imported
gpu_lock = claim_gpu("resources/locks")  # held until the process ends
cache_state = use_inductor_cache(snakemake.params.cache_dir, fresh=snakemake.params.run["repeat"] == 0)

from compile_study.io import write_json_atomic  # noqa: E402
from compile_study.profiling import write_empty_trace  # noqa: E402
from compile_study.train import RunConfig, model_config_for, run_and_record  # noqa: E402

data_dir = os.path.dirname(snakemake.input.data[0])
model_cfg = model_config_for(data_dir, snakemake.params.model)
record = run_and_record(model_cfg, RunConfig(**snakemake.params.run), data_dir, snakemake.params.device, snakemake.threads,
                        trace_path=snakemake.output.trace)
record["env"]["inductor_cache"] = cache_state
print(record["status"], record["error"] or "", record["metrics"].get("steady_step_ms"))
if not os.path.exists(snakemake.output.trace):  # failed before the profiler ran: an empty, openable trace
    write_empty_trace(snakemake.output.trace, f"{record['status']}: {record['error']}")
write_json_atomic(snakemake.output.record, record)
