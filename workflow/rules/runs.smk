wildcard_constraints:
    compile_mode="eager|default|reduce-overhead|max-autotune(-no-cudagraphs)?",
    compile_scope="module|forward|backward|step|graph-break",
    precision="fp32|tf32|bf16",
    shape_regime=r"static|dynamic(-true|-false|-marked)?|bucketed(-\d+)+",
    batch_size=r"\d+",
    repeat=r"\d+",


rule train_run:
    """One configuration, one process, one JSON record (a failure is a record too)."""
    input:
        data=DATA_FILES,
        cold_run=cold_run_record,
    output:
        record=RUN_RECORD,
        trace=RUN_TRACE,
    log:
        RUN_RECORD.replace("results/", "logs/").replace(".json", ".log"),
    threads: workflow.cores
    resources:
        **TIMED_JOB,
        # timed runs never overlap: the limit is set in profiles/default/config.yaml
        timed_run=1,
    params:
        run=run_params,
        model=config["model"],
        device=DEVICE,
        cache_dir=inductor_cache_dir,
    script:
        "../scripts/train_run.py"


rule parity:
    """Eager vs compiled with dropout off and the same seed: losses and final accuracy."""
    input:
        data=DATA_FILES,
    output:
        PARITY_RECORD,
    log:
        PARITY_RECORD.replace("results/", "logs/").replace(".json", ".log"),
    threads: workflow.cores
    resources:
        **TIMED_JOB,
        timed_run=1,
    params:
        model=config["model"],
        settings=config["parity"][DEVICE],
        device=DEVICE,
    script:
        "../scripts/parity.py"
