# The torch.compile training study: data -> eager and compiled runs -> summary -> figures -> paper.
#   snakemake --cores all                                (profiles/default is picked up automatically)
#   snakemake --cores all --directory reference/<name>   (a stored study: remake its summary, figures, paper)
from snakemake.utils import min_version

from compile_study.core.calls import bytecode, study_lock

min_version("9.0")
# One invocation per study: a second one is refused here, before it imports torch or plans anything.
study_lock.hold_for(workflow)
# An image whose packages have no bytecode compiles torch from source in every job's process: keep it here.
bytecode.keep(".snakemake/pycache")


configfile: "config.yaml"


# The front page of Snakemake's own report (snakemake --report report.html; captions in workflow/report/).
report: "workflow/report/workflow.rst"


# Used with --sdm apptainer (containers/compile-study.def says how to build it).
container: "containers/compile-study.sif"


include: "workflow/rules/common.smk"


if not P.stored:

    include: "workflow/rules/data.smk"
    include: "workflow/rules/model.smk"
    include: "workflow/rules/compiles.smk"
    include: "workflow/rules/runs.smk"


include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/paper.smk"


if P.yardstick:

    include: "workflow/rules/reproduction.smk"


onstart:
    P.before_start()


rule all:
    input:
        P.all_targets,
