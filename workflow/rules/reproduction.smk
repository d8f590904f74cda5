rule reproduction:
    """This study's speedups against those of its yardstick (config `yardstick`), configuration by configuration,
    by the rule in compile_study/aggregate/compare.py: reproduced, differs, or inconclusive.
    """
    input:
        yardstick=yardstick_records,
        records=run_records,
    output:
        md=L.reproduction("md"),
        csv=L.reproduction("csv"),
    log:
        L.log("reproduction"),
    resources:
        **CPU_JOB,
    params:
        names=REPRODUCTION_NAMES,
    script:
        "../scripts/reproduction.py"
