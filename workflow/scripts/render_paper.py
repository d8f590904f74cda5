"""Snakemake shim for rule paper (snakemake --cores all results/cpu/paper.md)."""

import os

import yaml

from compile_study.logs import redirect_output
from compile_study.stages import paper_stage

redirect_output(snakemake.log[0])
inp = snakemake.input
config = yaml.safe_load(open(inp.config))
checks_dir = os.path.dirname(inp.get("timer_check") or inp.get("reference_drift") or "") or None
paper_stage(os.path.join(inp.templates, "paper.md.j2"), inp.summary, inp.parity, inp.environment, inp.facts,
            inp.figures, snakemake.output.md, config, snakemake.params.device, inp.claims,
            tex_template=os.path.join(inp.templates, "paper.tex.j2"), tex_out=snakemake.output.tex,
            checks_dir=checks_dir)
