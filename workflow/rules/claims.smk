rule mlp_claim:
    """The two-layer MLP example behind the "1.2-1.5x faster" claim, timed as published and properly."""
    output:
        f"results/{DEVICE}/claims/mlp.json",
    log:
        f"logs/{DEVICE}/mlp_claim.log",
    threads: workflow.cores
    resources:
        **TIMED_JOB,
        timed_run=1,
    params:
        device=DEVICE,
        batch_sizes=config["claims"]["mlp"][DEVICE]["batch_sizes"],
        steps=config["claims"]["mlp"][DEVICE]["steps"],
        repeats=config["claims"]["mlp"][DEVICE]["repeats"],
    script:
        "../scripts/mlp_claim.py"
