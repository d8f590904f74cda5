from compile_study.report import workflow_report


rule summarize:
    """All run records -> per-configuration table with speedups over eager and intervals, and the claims checked."""
    input:
        unpack(optional_inputs),
        records=run_records,
        parity=parity_records,
        facts=L.facts,
    output:
        summary=report(
            L.summary,
            caption="../report/summary.rst",
            category="Tables",
            labels={"table": "summary"},
        ),
        parity=L.parity_table,
        environment=report(
            L.environment,
            caption="../report/software.rst",
            category="Software",
            labels=workflow_report.software,
        ),
        claims=report(
            L.claims,
            caption="../report/claims.rst",
            category="Tables",
            labels={"table": "claims"},
        ),
    log:
        L.log("summarize"),
    resources:
        **CPU_JOB,
    script:
        "../scripts/summarize.py"
