"""Snakemake shim for rule parity (snakemake --cores all results/cpu/parity/fp32/default.json)."""

import os

from compile_study.core.logs import redirect_output
from compile_study.measure.isolation import bound_threads, claim_gpu, use_inductor_cache

redirect_output(snakemake.log[0])
bound_threads(snakemake.threads)  # before torch is imported
gpu_lock = claim_gpu("resources/locks")  # held until the process ends
# the cache of the grid cell at the parity batch size (rule parity says why), warm after that cell's runs
print("inductor cache:", use_inductor_cache(snakemake.params.cache_dir, fresh=False))

import torch  # noqa: E402

from compile_study.checks.parity import check  # noqa: E402
from compile_study.core.io import write_json_atomic  # noqa: E402
from compile_study.measure.run import model_config_for  # noqa: E402

torch.set_num_threads(snakemake.threads)
data_dir = os.path.dirname(snakemake.input.data[0])
w = snakemake.wildcards
result = check(model_config_for(data_dir, snakemake.params.model), w.compile_mode, w.precision, data_dir,
               torch.device(snakemake.params.device), **snakemake.params.settings)
print({k: v for k, v in result.items() if not k.endswith("_losses")})
write_json_atomic(snakemake.output[0], result)
