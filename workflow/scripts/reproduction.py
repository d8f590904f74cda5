"""Snakemake shim for rule reproduction (snakemake --cores all results/cuda/reproduction.md)."""

from compile_study.core.logs import redirect_output
from compile_study.report.reproduction import write_records

redirect_output(snakemake.log[0])
result = write_records(snakemake.input.yardstick, snakemake.input.records, tuple(snakemake.params.names),
                       dict(snakemake.output.items()))
print(result.table.to_string())
