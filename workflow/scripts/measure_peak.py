"""Snakemake shim for rule measure_peak (snakemake --cores all results/cpu/peak.json)."""

from compile_study.core.logs import redirect_output
from compile_study.measure.isolation import bound_threads, claim_gpu

redirect_output(snakemake.log[0])
bound_threads(snakemake.threads)  # before torch is imported
gpu_lock = claim_gpu("resources/locks")  # held until the process ends

import torch  # noqa: E402

from compile_study.checks.peak import measure_peak  # noqa: E402
from compile_study.core.env import collect  # noqa: E402
from compile_study.core.io import write_json_atomic  # noqa: E402

device = torch.device(snakemake.params.device)
torch.set_num_threads(snakemake.threads)
peak = {"peaks": measure_peak(device), "env": collect(device)}
print(peak["peaks"])
write_json_atomic(snakemake.output[0], peak)
