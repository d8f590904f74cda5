"""Snakemake shim for rule figures (snakemake --cores all results/cpu/figures)."""

from compile_study.logs import redirect_output
from compile_study.stages import figure_stage

redirect_output(snakemake.log[0])
inp = snakemake.input
figure_stage(inp.summary, inp.environment, inp.records, snakemake.output[0])
