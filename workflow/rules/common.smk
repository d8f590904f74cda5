# The study's plan (compile_study/plan/study.py): the config checked, the device's grid, and every rule's inputs,
# outputs, params and resources. The rule files only wire rules to it; a dry run changes no file.
from compile_study.measure.checks import targets as check_targets
from compile_study.core import io, vocab
from compile_study.measure import jobs
from compile_study.plan.study import Plan

P = Plan(workflow, config)
# the compile phase and the timed runs, as the run: blocks call them
C = P.compile
T = P.timed
L = P.layout  # where every file of the study lives (compile_study/core/layout.py)


wildcard_constraints:
    **vocab.wildcard_constraints(),
