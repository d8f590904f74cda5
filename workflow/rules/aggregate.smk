rule summarize:
    """All run records -> per-configuration table with speedups over eager and intervals, and the claims checked."""
    input:
        unpack(P.optional_inputs),
        records=P.run_records,
        compiles=P.compile_records,
        parity=P.parity_records,
        facts=L.facts,
    output:
        summary=L.summary,
        parity=L.parity_table,
        environment=L.environment,
        claims=L.claims,
    log:
        L.log("summarize"),
    resources:
        **P.cpu_job,
    script:
        "../scripts/summarize.py"
