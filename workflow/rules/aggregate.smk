rule summarize:
    """All run records -> per-configuration table with speedups over eager and intervals, and the claims checked."""
    input:
        unpack(optional_inputs),
        records=run_records,
        parity=parity_records,
        facts=L.facts,
    output:
        summary=L.summary,
        parity=L.parity_table,
        environment=L.environment,
        claims=L.claims,
        decisions=L.decisions,
    log:
        L.log("summarize"),
    resources:
        **CPU_JOB,
    script:
        "../scripts/summarize.py"
