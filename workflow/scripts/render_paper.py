"""Snakemake shim for rule paper (snakemake --cores all paper/paper.md)."""

import json
import os

import pandas as pd

from compile_study.io import write_text_atomic
from compile_study.logs import redirect_output
from compile_study.report import render

redirect_output(snakemake.log[0])
inp = snakemake.input
text = render(
    inp.template,
    pd.read_csv(inp.summary),
    json.loads(open(inp.environment).read()),
    json.loads(open(inp.facts).read()),
    dict(
        config=snakemake.params.config,
        grid=snakemake.params.grid,
        device=snakemake.params.device,
        figure=os.path.relpath(inp.figure, os.path.dirname(snakemake.output[0])),
    ),
)
write_text_atomic(snakemake.output[0], text)
