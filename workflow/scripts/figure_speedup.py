"""Snakemake shim for rule figure_speedup (snakemake --cores all paper/figures/speedup.png)."""

from compile_study.logs import redirect_output
from compile_study.stages import figure_stage

redirect_output(snakemake.log[0])
figure_stage(snakemake.input.summary, snakemake.input.environment, [snakemake.output.png, snakemake.output.pdf])
