"""Snakemake shim for rule figures (snakemake --cores all results/cpu/figures)."""

import json

import pandas as pd

from compile_study.aggregate.figures import figures
from compile_study.core import record
from compile_study.core.logs import redirect_output

redirect_output(snakemake.log[0])
inp = snakemake.input
environment = json.loads(open(inp.environment).read())
figures.draw_all(pd.read_csv(inp.summary), record.table(inp.records), environment, snakemake.output[0])
