# Copies into the study directory: cheap, so never sent to a cluster's queue.
localrules:
    study_facts,
    study_config,


rule prepare_data:
    """AG News (hub, CSV or a labelled synthetic stand-in) -> token ids, lengths, labels, tokenizer, facts."""
    output:
        P.data_files,
    log:
        L.log("prepare_data"),
    resources:
        **P.lanes.cpu_job,
    params:
        data=config["data"],
        max_len=config["model"]["max_len"],
        cache_dir="resources/hf_cache",
    script:
        "../scripts/prepare_data.py"


rule study_facts:
    """The data facts, copied into the study directory so that a stored study carries them."""
    input:
        f"{P.data_dir}/facts.json",
    output:
        L.facts,
    log:
        L.log("study_facts"),
    resources:
        **P.lanes.cpu_job,
    run:
        io.copy_atomic(input[0], output[0])


rule study_config:
    """The study's merged config (config.yaml, overlays, --config), stored beside its records."""
    output:
        L.config,
    log:
        L.log("study_config"),
    resources:
        **P.lanes.cpu_job,
    params:
        config=config,
    script:
        "../scripts/study_config.py"
