"""Snakemake shim for rule check_model (snakemake --cores all results/cpu/model.json)."""

import os
import sys

from compile_study.core.logs import redirect_output, to_console
from compile_study.measure.isolation import bound_threads, pin_cores, take_gpu

redirect_output(snakemake.log[0])
bound_threads(snakemake.threads)  # before torch is imported
gpu = take_gpu("resources/locks")  # on a host with several GPUs: one of them, held until the process ends
if gpu is not None:
    gpu_lock, index, gpus = gpu
    os.environ["CUDA_VISIBLE_DEVICES"] = str(index)
    pin_cores(index, gpus)

import torch  # noqa: E402

from compile_study.core.io import write_json_atomic  # noqa: E402
from compile_study.core.plug import PlugError  # noqa: E402
from compile_study.core.plug_check import check_plug  # noqa: E402
from compile_study.measure.run import model_config_for  # noqa: E402

cfg = model_config_for(os.path.dirname(snakemake.input.data[0]), snakemake.params.model)
try:
    facts = check_plug(cfg, torch.device(snakemake.params.device), os.path.dirname(snakemake.input.data[0]))
except PlugError as exc:  # the study stops before its first timed run, saying why where Snakemake prints
    to_console(f"check_model: {exc}")
    sys.exit(str(exc))
print({k: v for k, v in facts.items() if k != "config"})
write_json_atomic(snakemake.output[0], facts)
