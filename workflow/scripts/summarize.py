"""Snakemake shim for rule summarize (snakemake --cores all results/cpu/summary.csv)."""

from compile_study.logs import redirect_output
from compile_study.summary import write

redirect_output(snakemake.log[0])
inp = snakemake.input
summary = write(inp.records, inp.parity, inp.facts, dict(snakemake.output.items()), inp.get("peak"), inp.get("mlp"))
print(summary.to_string())
