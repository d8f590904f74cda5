"""Snakemake shim for rule paper (snakemake --cores all paper/paper.md paper/paper.tex)."""

import os

from compile_study.logs import redirect_output
from compile_study.stages import paper_stage

redirect_output(snakemake.log[0])
inp = snakemake.input
paper_stage(inp.template, inp.summary, inp.parity, inp.environment, inp.facts, os.path.dirname(inp.figures[0]),
            snakemake.output.md, snakemake.params.config, snakemake.params.device, inp.claims,
            tex_template=inp.tex_template, tex_out=snakemake.output.tex)
