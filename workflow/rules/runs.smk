# The timed jobs: every one holds the machine's `timed_run` slot (profiles/default: one at a time; on a host
# with N GPUs, N at once, each locking its own GPU), so no timed block competes with another job. Each is a
# `run:` block, run in a thread of Snakemake's own process (profiles/default: force-use-threads), that has the
# warm launcher make the job's fresh process (compile_study/measure/launch.py, measure/jobs.py): no job pays
# for an interpreter, its imports or a Snakemake of its own.


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
        search_cache=shared_search_cache,
        disturbance=config["disturbance"],
    run:
        jobs.train_run(
            params,
            DATA_DIR,
            output.record,
            output.trace,
            log[0],
            threads,
            progress,
            expected_s=expected_seconds(wildcards),
        )


rule parity:
    """Eager vs compiled with dropout off and the same seed, losses and final accuracy: a check per compiled mode
    and precision of the grid, each where the grid has a static cell of its mode and precision, at that cell's
    batch size and on its Inductor cache (parity_cell). The checks time nothing, so they run at once, a process
    each, in one job that holds the machine's timed slots (no timed job runs beside them).
    """
    input:
        unpack(parity_inputs),
    output:
        parity_records(),
    log:
        [check["log"] for check in parity_checks()],
    threads: TIMED_THREADS
    resources:
        **TIMED_JOB,
        timed_run=max(1, GPUS),
    params:
        checks=parity_checks,
    run:
        jobs.parity_jobs(PARITY, params.checks, threads, DEVICE)


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
        peak={"device": DEVICE},
    run:
        jobs.result_job(
            PEAK, params.peak, output[0], log[0], threads, DEVICE, host_env=True
        )


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
        claim=mlp_job,
    run:
        jobs.result_job(
            MLP, params.claim, output[0], log[0], threads, DEVICE, host_env=True
        )


rule method_check:
    """A check of the method (config `checks`): the step timer, drift of the in-process reference, two timed
    runs at once (concurrency: it uses every GPU itself, so it holds the whole `timed_run` pool), or the warm
    launcher against fresh processes (launcher).
    """
    input:
        unpack(check_inputs),
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
    run:
        method_check(wildcards.check, output[0], log[0], threads)
