"""What the checks' job processes run (measure/process/launch.py): as in measure/targets.py, a function of no arguments
that imports the check's function in the job's own process and returns it. `method_check` gives each method
check's by its module (measure/checks/spec.py; a check that drives processes from Snakemake's own has none).
`tests/test_targets.py` resolves every one.
"""

from __future__ import annotations


def parity():
    """Rule parity: eager against compiled with dropout off (measure/checks/parity.py)."""
    from compile_study.measure.checks.parity import job

    return job


def peak():
    """Rule measure_peak: the device's matmul peak (measure/checks/peak.py)."""
    from compile_study.measure.checks.peak import job

    return job


def mlp_claim():
    """Rule mlp_claim: the two-layer MLP behind a common claim (measure/checks/mlp_claim.py)."""
    from compile_study.measure.checks.mlp_claim import job

    return job


def _main_of(module: str):
    import importlib

    return importlib.import_module(module).main


def method_check(module: str):
    """Rule method_check: a method check's `main(data_dir, out_path, model)` (measure/checks/spec.py), imported
    from its module in the job's process."""
    import functools

    return functools.partial(_main_of, module)
