"""Snakemake shim for rule reproduction (snakemake --cores all results/cuda/reproduction.md)."""

from compile_study.core.logs import redirect_output
from compile_study.report.reproduction import write_records

redirect_output(snakemake.log[0])
stored = {"records": snakemake.input.yardstick, "facts": snakemake.input.yardstick_facts}
study = {"records": snakemake.input.records, "facts": snakemake.input.facts}
result = write_records(stored, study, tuple(snakemake.params.names), dict(snakemake.output.items()),
                       snakemake.params.allow_different_data, snakemake.input.host_effect)
print(result.table.to_string())
