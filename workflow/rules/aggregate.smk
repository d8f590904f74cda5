rule summarize:
    """All run records -> per-configuration table with speedups over eager."""
    input:
        run_records,
    output:
        summary=f"results/{DEVICE}/summary.csv",
        environment=f"results/{DEVICE}/environment.json",
    log:
        f"logs/{DEVICE}/summarize.log",
    script:
        "../scripts/summarize.py"
