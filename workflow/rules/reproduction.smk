rule reproduction:
    """This study's speedups against those of its yardstick (config `yardstick`), configuration by configuration,
    by the rule in compile_study/aggregate/compare.py: reproduced, differs, or inconclusive.
    """
    input:
        yardstick=P.yardstick_records,
        records=P.run_records,
    output:
        md=L.reproduction("md"),
        csv=L.reproduction("csv"),
    log:
        L.log("reproduction"),
    resources:
        **P.cpu_job,
    params:
        names=P.reproduction_names,
    script:
        "../scripts/reproduction.py"
