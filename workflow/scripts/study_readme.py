"""Snakemake shim for rule study_readme (snakemake --cores all results/cuda/README.md)."""

from compile_study.logs import redirect_output
from compile_study.readme import write

redirect_output(snakemake.log[0])
write(dict(snakemake.input.items()), snakemake.params.rebuild, snakemake.output[0])
