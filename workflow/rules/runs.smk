# The timed jobs: every one holds the machine's `timed_run` slot (profiles/default: one at a time; on a host
# with N GPUs, N at once, each locking its own GPU), so no timed block competes with another job.


rule train_run:
    """One configuration, one process, one JSON record (a failure is a record too)."""
    input:
        data=DATA_FILES,
        model=L.model,
        cold_run=cold_run_record,
    output:
        record=L.record_pattern,
        trace=L.trace_pattern,
    log:
        L.log(
            "runs/{shape_regime}/{precision}/{compile_mode}/{compile_scope}/bs{batch_size}/r{repeat}"
        ),
    threads: TIMED_THREADS
    resources:
        **TIMED_JOB,
        timed_run=1,
    params:
        run=run_params,
        model=config["model"],
        device=DEVICE,
        cache_dir=inductor_cache_dir,
        expected_runs=len(RUNS),
        records_glob=L.records_glob,
    script:
        "../scripts/train_run.py"


rule parity:
    """Eager vs compiled with dropout off and the same seed: losses and final accuracy. Where the grid has a
    static cell of the mode and precision, at its batch size and on its Inductor cache (parity_cell).
    """
    input:
        unpack(parity_inputs),
    output:
        L.parity_pattern,
    log:
        L.log("parity/{precision}/{compile_mode}"),
    threads: TIMED_THREADS
    resources:
        **TIMED_JOB,
        timed_run=1,
    params:
        model=config["model"],
        settings=parity_settings,
        device=DEVICE,
        cache_dir=parity_cache_dir,
    script:
        "../scripts/parity.py"


rule measure_peak:
    """The device's matmul peak per precision (MFU's denominator), timed alone like a run."""
    output:
        L.peak,
    log:
        L.log("measure_peak"),
    threads: TIMED_THREADS
    resources:
        **TIMED_JOB,
        timed_run=1,
    params:
        device=DEVICE,
    script:
        "../scripts/measure_peak.py"


rule mlp_claim:
    """The two-layer MLP example behind the "1.2-1.5x faster" claim, timed as published and properly."""
    output:
        L.mlp,
    log:
        L.log("mlp_claim"),
    threads: TIMED_THREADS
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


rule method_check:
    """A check of the method (config `checks`): the step timer, drift of the in-process reference, or two timed
    runs at once (concurrency: it uses every GPU itself, so it holds the whole `timed_run` pool).
    """
    input:
        data=DATA_FILES,
        model=L.model,
    output:
        L.check("{check}"),
    log:
        L.log("checks/{check}"),
    wildcard_constraints:
        check="|".join(CHECKS),
    threads:
        lambda wc: (
            min(workflow.cores, 2 * TIMED_THREADS)
            if wc.check == "concurrency"
            else TIMED_THREADS
        )
    resources:
        **TIMED_JOB,
        timed_run=lambda wc: max(1, GPUS) if wc.check == "concurrency" else 1,
    params:
        model=config["model"],
    script:
        "../scripts/method_check.py"
