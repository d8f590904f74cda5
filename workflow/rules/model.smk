rule check_model:
    """The configured model (built-in or plugged, config `model`) tried on the device before the first timed run,
    in a fresh process of the launcher: a bad plug stops the study here, with a message naming the key; the
    model's facts go to model.json.
    """
    input:
        data=P.data_files,
    output:
        L.model,
    log:
        L.log("check_model"),
    threads: P.lanes.timed_threads
    resources:
        **P.lanes.timed_job,
        timed_run=1,
    params:
        model=config["model"],
        device=P.device,
    run:
        jobs.model_job(
            P.data_dir,
            params.model,
            params.device,
            output[0],
            log[0],
            threads,
            expected_s=T.expected_job_seconds("check_model"),
        )
