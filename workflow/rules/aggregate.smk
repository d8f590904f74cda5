rule measure_peak:
    """The device's matmul peak per precision (MFU's denominator), timed alone like a run."""
    output:
        f"results/{DEVICE}/peak.json",
    log:
        f"logs/{DEVICE}/measure_peak.log",
    threads: workflow.cores
    resources:
        **TIMED_JOB,
        timed_run=1,
    params:
        device=DEVICE,
    script:
        "../scripts/measure_peak.py"


rule summarize:
    """All run records -> per-configuration table with speedups over eager, and the claims checked."""
    input:
        records=run_records,
        peak=f"results/{DEVICE}/peak.json",
        parity=parity_records,
        mlp=rules.mlp_claim.output[0],
        facts=f"{DATA_DIR}/facts.json",
    output:
        summary=f"results/{DEVICE}/summary.csv",
        parity=f"results/{DEVICE}/parity.csv",
        environment=f"results/{DEVICE}/environment.json",
        claims=f"results/{DEVICE}/claims.csv",
    log:
        f"logs/{DEVICE}/summarize.log",
    resources:
        **CPU_JOB,
    script:
        "../scripts/summarize.py"
