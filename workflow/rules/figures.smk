rule figures:
    """The paper's figures from the summary and the records (plotting only: never reruns a timed job)."""
    input:
        summary=L.summary,
        environment=L.environment,
        records=P.run_records,
    output:
        directory(L.figures),
    log:
        L.log("figures"),
    resources:
        **P.cpu_job,
    script:
        "../scripts/figures.py"
