# The compile phase: every compiled configuration's cold compiles and the parity checks, several at once on
# disjoint cores (`threads`: a compile's share), never beside a timed job (measure/process/isolation.py Host), ahead of
# the timed runs (`priority`), which all start from the cache a configuration's first cold compile leaves.


rule cold_compile:
    """One cold compile of a configuration, a fresh process from an empty Inductor cache (measure/cold.py)."""
    input:
        unpack(P.compile.inputs),
    output:
        L.compile_pattern,
    log:
        L.compile_log,
    priority: 10
    threads: P.compile.threads
    resources:
        **P.compile.job,
        timed_run=P.compile.timed_slots,
    params:
        job=P.compile.params,
    run:
        jobs.compile_run(
            params.job,
            P.data_dir,
            output[0],
            log[0],
            T.progress,
            C.expected_seconds(wildcards),
        )


rule portable_start:
    """A portable start of a configuration: a fresh process whose empty cache is fed the portable artifacts its
    first cold compile saved (measure/cold.py), timed to its first steps as a cold compile is.
    """
    input:
        unpack(P.compile.portable_inputs),
    output:
        L.portable_pattern,
    log:
        L.portable_log,
    priority: 10
    threads: P.compile.cores_per_compile
    resources:
        **P.compile.job,
    params:
        job=P.compile.portable_params,
    run:
        jobs.compile_run(
            params.job,
            P.data_dir,
            output[0],
            log[0],
            T.progress,
            expected_s=C.expected_portable_seconds(wildcards),
        )


rule parity:
    """Eager vs compiled with dropout off and the same seed, losses and final accuracy: a check per compiled mode
    and precision of the grid, at the batch size of the grid's static cell of its mode and precision and on the
    cache that cell's first cold compile filled (plan/study.py parity_cell). It times nothing: a compile slot.
    """
    input:
        unpack(P.compile.parity_inputs),
    output:
        L.parity_pattern,
    log:
        L.parity_log,
    priority: 10
    threads: P.compile.cores_per_compile
    resources:
        **P.compile.job,
    params:
        check=P.compile.parity_check,
    run:
        jobs.parity_job(
            check_targets.parity,
            params.check,
            output[0],
            log[0],
            threads,
            P.device,
            expected_s=T.expected_job_seconds("parity"),
        )
