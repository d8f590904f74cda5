"""Snakemake shim for rule paper (snakemake --cores all results/cpu/paper.md)."""

import yaml

from compile_study.core.logs import redirect_output
from compile_study.report.build import write
from compile_study.report.paper import describe

redirect_output(snakemake.log[0])
config = yaml.safe_load(open(snakemake.input.config))
write(dict(snakemake.input.items()), config, snakemake.params.device, snakemake.output.md, snakemake.output.tex,
      snakemake.params.study)
print(f"{snakemake.output.md}, {snakemake.output.tex}:", describe(open(snakemake.output.md).read()))
