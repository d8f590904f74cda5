"""Snakemake shim for rule summarize (snakemake --cores all results/cpu/summary.csv)."""

from compile_study.logs import redirect_output
from compile_study.stages import summary_stage

redirect_output(snakemake.log[0])
out = snakemake.output
print(summary_stage(snakemake.input.records, snakemake.input.peak, out.summary, out.environment).to_string())
