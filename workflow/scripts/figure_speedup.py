"""Snakemake shim for rule figure_speedup (snakemake --cores all paper/figures/speedup.png)."""

import json

import pandas as pd

from compile_study.figures import speedup_vs_batch_size
from compile_study.logs import redirect_output

redirect_output(snakemake.log[0])
summary = pd.read_csv(snakemake.input.summary)
env = json.loads(open(snakemake.input.environment).read())
device = env["device_name"] if isinstance(env["device_name"], str) else ", ".join(env["device_name"])
title = f"torch.compile training speedup on {device} (torch {env['torch']})"
speedup_vs_batch_size(summary, title, [snakemake.output.png, snakemake.output.pdf])
