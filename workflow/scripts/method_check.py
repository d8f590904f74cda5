"""Snakemake shim for rule method_check (snakemake --cores all results/cuda/checks/timer_check.json)."""

import os

from compile_study.isolation import bound_threads, claim_gpu
from compile_study.logs import redirect_output

redirect_output(snakemake.log[0])
bound_threads(snakemake.threads)  # before torch is imported
gpu_lock = claim_gpu("resources/locks")  # held until the process ends

from compile_study.checks import run_check  # noqa: E402

run_check(snakemake.wildcards.check, os.path.dirname(snakemake.input.data[0]), snakemake.output[0],
          snakemake.params.device, snakemake.threads)
