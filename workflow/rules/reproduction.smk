rule reproduction:
    """This study's speedups against those of its yardstick (config `yardstick`), configuration by configuration,
    by the rule in compile_study/aggregate/compare/compare.py: reproduced, differs, or inconclusive, once the two are
    known to have measured the same data and protocol (else "not comparable"); each interval carries how much
    hosts of one kind differ (reference/host-effect.json, made by `python -m compile_study host-effect`). The
    report opens with the yardstick paper's claims judged on this study (compile_study/aggregate/compare/rejudge.py), and
    judges speedups cell by cell only where both studies ran on one kind of device.
    """
    input:
        unpack(P.yardstick_claims),
        yardstick=P.yardstick_records,
        yardstick_facts=P.yardstick_facts,
        records=P.run_records,
        facts=L.facts,
        host_effect=L.host_effect,
        summary=L.summary,
        claims=L.claims,
    output:
        md=L.reproduction("md"),
        csv=L.reproduction("csv"),
    log:
        L.log("reproduction"),
    resources:
        **P.lanes.cpu_job,
    params:
        names=P.reproduction_names,
        allow_different_data=config["yardstick"]["allow_different_data"],
    script:
        "../scripts/reproduction.py"
