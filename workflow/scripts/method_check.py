"""Snakemake shim for rule method_check (snakemake --cores all results/cuda/checks/timer_check.json)."""

import importlib
import os

from compile_study.core.logs import redirect_output
from compile_study.measure.isolation import bound_threads, claim_gpu, job_threads

redirect_output(snakemake.log[0])
bound_threads(snakemake.threads)  # before torch is imported
# held until the process ends; the concurrency check places its own processes on the GPUs
gpu_lock = None if snakemake.wildcards.check == "concurrency" else claim_gpu("resources/locks")

import torch  # noqa: E402

torch.set_num_threads(job_threads(snakemake.threads))
check = importlib.import_module(f"compile_study.checks.{snakemake.wildcards.check}")  # layout.CHECKS
check.main(os.path.dirname(snakemake.input.data[0]), snakemake.output[0], dict(snakemake.params.model))
