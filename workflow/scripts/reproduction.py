"""Snakemake shim for rule reproduction (snakemake --cores all results/cuda/reproduction.md)."""

from compile_study.core.logs import redirect_output
from compile_study.report.compare.reproduction import write_records

redirect_output(snakemake.log[0])
given = dict(snakemake.input.items())
stored = {"records": snakemake.input.yardstick, "facts": snakemake.input.yardstick_facts,
          **{k: given.get(f"yardstick_{k}") for k in ("summary", "decisions", "claims")}}
study = {"records": snakemake.input.records, "facts": snakemake.input.facts, "summary": snakemake.input.summary,
         "claims": snakemake.input.claims}
result = write_records(stored, study, tuple(snakemake.params.names), dict(snakemake.output.items()),
                       snakemake.params.allow_different_data, snakemake.input.host_effect)
print(result.table.to_string())
