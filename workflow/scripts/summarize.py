"""Snakemake shim for rule summarize (snakemake --cores all results/cpu/summary.csv)."""

import sys

from compile_study.aggregate.summary import write
from compile_study.core.logs import redirect_output
from compile_study.core.record import RecordError
from compile_study.measure.checks.spec import method_checks

redirect_output(snakemake.log[0])
inp = snakemake.input
try:
    summary = write(inp.records, inp.parity, inp.facts, dict(snakemake.output.items()), inp.get("peak"), inp.get("mlp"),
                    {name: inp.get(name) for name in method_checks()}, inp.get("compiles", []))
except RecordError as e:  # damaged after the workflow loaded (it sets damaged records aside): the next run does
    sys.exit(f"record error: {e}; run the same command again: it sets the record aside and redoes its run")
print(summary.to_string())
