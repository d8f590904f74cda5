"""Snakemake shim for rule summarize (snakemake --cores all results/cpu/summary.csv)."""

from compile_study.logs import redirect_output
from compile_study.stages import summary_stage

redirect_output(snakemake.log[0])
out = snakemake.output
inp = snakemake.input
summary = summary_stage(inp.records, inp.peak, inp.parity, inp.mlp, inp.facts, out.summary, out.parity, out.environment,
                        out.claims)
print(summary.to_string())
