rule figures:
    """Speedup, shape regimes, bucket sweep, step timeline and kernels per step (plotting only: never reruns a GPU job)."""
    input:
        summary=f"results/{DEVICE}/summary.csv",
        environment=f"results/{DEVICE}/environment.json",
        records=run_records,
    output:
        multiext("paper/figures/speedup", ".png", ".pdf"),
        multiext("paper/figures/regimes", ".png", ".pdf"),
        multiext("paper/figures/buckets", ".png", ".pdf"),
        multiext("paper/figures/timeline", ".png", ".pdf"),
        multiext("paper/figures/kernels", ".png", ".pdf"),
    log:
        f"logs/{DEVICE}/figures.log",
    resources:
        **CPU_JOB,
    script:
        "../scripts/figures.py"
