rule figures:
    """The paper's figures from the summary and the records (plotting only: never reruns a timed job)."""
    input:
        summary=L.summary,
        environment=L.environment,
        records=P.run_records,
    output:
        report(
            directory(L.figures),
            patterns=["{figure}.png"],
            caption="../report/figure.rst",
            category="Figures",
            labels={"figure": "{figure}"},
        ),
    log:
        L.log("figures"),
    resources:
        **P.lanes.cpu_job,
    script:
        "../scripts/figures.py"
