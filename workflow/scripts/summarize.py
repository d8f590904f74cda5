"""Snakemake shim for rule summarize (snakemake --cores all results/cpu/summary.csv)."""

from compile_study.aggregate.summary import write
from compile_study.core.logs import redirect_output

redirect_output(snakemake.log[0])
inp = snakemake.input
summary = write(inp.records, inp.parity, inp.facts, dict(snakemake.output.items()), inp.get("peak"), inp.get("mlp"))
print(summary.to_string())
