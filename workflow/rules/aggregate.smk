rule summarize:
    """All run records -> per-configuration table with speedups over eager and intervals, and the claims checked."""
    input:
        unpack(P.optional_inputs),
        records=P.run_records,
        compiles=P.compile.records,
        parity=P.compile.parity_records,
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
            labels=P.software_labels,
        ),
        claims=report(
            L.claims,
            caption="../report/claims.rst",
            category="Tables",
            labels={"table": "claims"},
        ),
        decisions=L.decisions,
    log:
        L.log("summarize"),
    resources:
        **P.lanes.cpu_job,
    script:
        "../scripts/summarize.py"
