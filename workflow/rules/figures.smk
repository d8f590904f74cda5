rule figure_speedup:
    """Speedup over eager vs batch size, one line per compile mode (plotting only: no GPU work)."""
    input:
        summary=f"results/{DEVICE}/summary.csv",
        environment=f"results/{DEVICE}/environment.json",
    output:
        png="paper/figures/speedup.png",
        pdf="paper/figures/speedup.pdf",
    log:
        f"logs/{DEVICE}/figure_speedup.log",
    script:
        "../scripts/figure_speedup.py"
