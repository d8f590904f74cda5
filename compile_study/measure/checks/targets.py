"""What the checks' job processes run (measure/process/launch.py): as in measure/targets.py, a function of no arguments
that imports the check's function in the job's own process and returns it. `METHOD_CHECKS` names each method
check's (core/layout.py CHECKS; the launcher check drives processes from Snakemake's own and has none).
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


def timer_check():
    from compile_study.measure.checks.timer_check import main

    return main


def reference_drift():
    from compile_study.measure.checks.reference_drift import main

    return main


def concurrency():
    from compile_study.measure.checks.concurrency import main

    return main


METHOD_CHECKS = {"timer_check": timer_check, "reference_drift": reference_drift, "concurrency": concurrency}
