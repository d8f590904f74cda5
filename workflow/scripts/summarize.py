"""Snakemake shim for rule summarize (snakemake --cores all results/cpu/summary.csv)."""

from compile_study.io import write_json_atomic, write_text_atomic
from compile_study.logs import redirect_output
from compile_study.summary import environment, load_records, summarize

redirect_output(snakemake.log[0])
records = load_records(snakemake.input)
summary = summarize(records)
write_text_atomic(snakemake.output.summary, summary.to_csv(index=False))
write_json_atomic(snakemake.output.environment, environment(records))
print(summary.to_string())
