"""Snakemake shim for rule paper_pdf (snakemake --cores all results/cpu/paper.pdf; needs latexmk)."""

from compile_study.core.logs import redirect_output
from compile_study.report.paper import build_pdf

redirect_output(snakemake.log[0])
print(build_pdf(snakemake.input.tex))
