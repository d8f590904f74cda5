"""Snakemake shim for rule summarize (snakemake --cores all results/cpu/summary.csv)."""

from compile_study.logs import redirect_output
from compile_study.stages import summary_stage

redirect_output(snakemake.log[0])
print(summary_stage(snakemake.input, snakemake.output.summary, snakemake.output.environment).to_string())
