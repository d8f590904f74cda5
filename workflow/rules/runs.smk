# The timed jobs: each holds a lane of the host (measure/process/isolation.py Host: a GPU and its share of the cores; the
# CPU is one lane) without compiles, so no timed block competes with another job. The matmul peak, the MLP claim,
# the method checks (and the model check) hold their lane whole: every core of it and the `timed_run` slot
# (profiles/default: one at a time; on a host with N GPUs, N at once). A run holds the same where loads do not
# overlap timed work (P.lanes.overlap: by default on a GPU with 8 cores or more to itself, never on the CPU); where they
# do, it takes half the lane's cores and no slot, so that the next run loads (process, data, model, warm cache,
# warm-up steps) on the other half while this one times, and times once this one has ended. Each is a `run:`
# block, run in a thread of Snakemake's own process (profiles/default: force-use-threads), that has the warm
# launcher make the job's fresh process (compile_study/measure/process/launch.py, measure/jobs.py): no job pays for an
# interpreter, its imports or a Snakemake of its own. Runs go in the order that hides the most loads beside
# timed parts (`priority`: aggregate/estimate/schedule.py), after the compile phase's jobs (priority 10).


rule train_run:
    """One configuration, one process, one JSON record (a failure is a record too)."""
    input:
        data=P.data_files,
        model=L.model,
        compiled=P.compiled_cache,
    output:
        record=L.record_pattern,
        trace=L.trace_pattern,
    log:
        L.record_log,
    priority: P.timed.priority
    threads: P.lanes.run_threads
    resources:
        **P.lanes.timed_job,
        timed_run=P.lanes.run_slots,
    params:
        run=P.timed.params,
        model=config["model"],
        device=P.device,
        cache_dir=P.timed.cache_dir,
        disturbance=config["disturbance"],
        overlap=P.lanes.overlap,
    run:
        jobs.train_run(
            params,
            P.data_dir,
            *output,
            log[0],
            threads,
            T.progress,
            expected_s=T.expected_seconds(wildcards),
        )


rule measure_peak:
    """The device's matmul peak per precision (MFU's denominator), timed alone like a run."""
    output:
        L.peak,
    log:
        L.log("measure_peak"),
    threads: P.lanes.timed_threads
    resources:
        **P.lanes.timed_job,
        timed_run=1,
    params:
        peak=P.timed.peak_job,
    run:
        jobs.result_job(
            check_targets.peak,
            params.peak,
            output[0],
            log[0],
            threads,
            P.device,
            host_env=True,
            expected_s=T.expected_job_seconds("measure_peak"),
        )


rule mlp_claim:
    """The two-layer MLP example behind the "1.2-1.5x faster" claim, timed as published and properly."""
    output:
        L.mlp,
    log:
        L.log("mlp_claim"),
    threads: P.lanes.timed_threads
    resources:
        **P.lanes.timed_job,
        timed_run=1,
    params:
        claim=P.timed.mlp_job,
    run:
        jobs.result_job(
            check_targets.mlp_claim,
            params.claim,
            output[0],
            log[0],
            threads,
            P.device,
            host_env=True,
            expected_s=T.expected_job_seconds("mlp_claim"),
        )


rule method_check:
    """A check of the method (config `checks`): the step timer, drift of the in-process reference, two timed
    runs at once (concurrency: it uses every GPU itself, so it holds the whole `timed_run` pool), or the warm
    launcher against fresh processes (launcher).
    """
    input:
        unpack(P.checks.inputs),
    output:
        L.check("{check}"),
    log:
        L.check_log("{check}"),
    wildcard_constraints:
        check="|".join(P.checks.names),
    threads: P.checks.threads
    resources:
        **P.lanes.timed_job,
        timed_run=P.checks.slots,
    params:
        model=config["model"],
    run:
        P.checks.run(wildcards.check, output[0], log[0], threads)
