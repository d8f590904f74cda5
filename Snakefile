# The torch.compile training study: data -> eager and compiled runs -> summary -> figure -> paper.
#   snakemake --cores all          (profiles/default is picked up automatically)
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


# Used with --sdm apptainer (containers/compile-study.def says how to build it).
container: "containers/compile-study.sif"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/runs.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/paper.smk"


rule all:
    input:
        "paper/paper.md",
        "paper/paper.tex",
