"""Snakemake shim checking the two-layer MLP claim: batch sizes -> one JSON (see compile_study/checks/mlp_claim.py)."""

from compile_study.core.logs import redirect_output
from compile_study.measure.isolation import bound_threads, claim_gpu

redirect_output(snakemake.log[0])
bound_threads(snakemake.threads)  # before torch is imported
gpu_lock = claim_gpu("resources/locks")  # held until the process ends

import torch  # noqa: E402

from compile_study.checks.mlp_claim import run  # noqa: E402
from compile_study.core.env import collect  # noqa: E402
from compile_study.core.io import write_json_atomic  # noqa: E402

device = torch.device(snakemake.params.device)
torch.set_num_threads(snakemake.threads)
params = snakemake.params
result = run(
    [int(bs) for bs in params.batch_sizes],
    device,
    steps=int(params.get("steps", 100)),
    repeats=int(params.get("repeats", 5)),
    seed=int(params.get("seed", 0)),
)
result["env"] = collect(device)
print([(row["batch_size"], row["status"], row.get("proper_speedup")) for row in result["rows"]])
write_json_atomic(snakemake.output[0], result)
