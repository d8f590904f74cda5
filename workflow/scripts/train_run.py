"""Snakemake shim for rule train_run: one configuration -> one JSON record.

    snakemake --cores all results/cpu/runs/static/fp32/default/bs32/r0.json
"""

import os
import shutil
import tempfile

from compile_study.logs import redirect_output

redirect_output(snakemake.log[0])
# Bound this job's CPU threads, Inductor's compile workers included, before torch is imported.
threads = str(snakemake.threads)
os.environ["OMP_NUM_THREADS"] = threads
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = threads
# A fresh Inductor/Triton cache: every run pays the cold compile a first-time user pays.
cache = tempfile.mkdtemp(prefix="inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")

import torch  # noqa: E402

from compile_study.io import write_json_atomic  # noqa: E402
from compile_study.model import ModelConfig  # noqa: E402
from compile_study.train import RunConfig, run_and_record  # noqa: E402

torch.set_num_threads(snakemake.threads)
facts_vocab = __import__("json").load(open(os.path.join(snakemake.params.data_dir, "facts.json")))["vocab_size"]
model_cfg = ModelConfig(vocab_size=facts_vocab, **snakemake.params.model)
record = run_and_record(model_cfg, RunConfig(**snakemake.params.run), snakemake.params.data_dir, snakemake.params.device)
record["env"]["inductor_cache"] = "cold (fresh TORCHINDUCTOR_CACHE_DIR per run)"
print(record["status"], record["error"] or "", record["metrics"].get("steady_step_ms"))
write_json_atomic(snakemake.output[0], record)
shutil.rmtree(cache, ignore_errors=True)
