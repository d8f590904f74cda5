"""Snakemake shim for rule study_readme (snakemake --cores all results/cuda/README.md)."""

from compile_study.core.logs import redirect_output
from compile_study.report.docs.readme import write

redirect_output(snakemake.log[0])
write(dict(snakemake.input.items()), snakemake.params.rebuild, snakemake.output[0], snakemake.params.logs)
