"""What a job's process runs (measure/process/launch.py): each target is a function of no arguments that imports the job's
function and returns it, so that the import happens in the job's own process (the launcher's parent, Snakemake's
process, never imports torch) and a reader, grep or a structure tool can follow the call from the rule to the
function. `tests/test_targets.py` resolves every one. The method checks' targets are in measure/checks/targets.py.

    jobs.train_run(...)  ->  launch.run(targets.run_job, ...)  ->  measure/run.py run_job(...) in the child
"""

from __future__ import annotations


def run_job():
    """Rule train_run: one configuration's timed run (measure/run.py)."""
    from compile_study.measure.run import run_job

    return run_job


def compile_job():
    """Rule cold_compile: one cold compile of a configuration (measure/cold.py)."""
    from compile_study.measure.cold import compile_job

    return compile_job


def model_check():
    """Rule check_model: the configured model built, sized and called once (core/models/plug_check.py)."""
    from compile_study.core.models.plug_check import job

    return job
