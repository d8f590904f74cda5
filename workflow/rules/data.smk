rule prepare_data:
    output:
        DATA_FILES,
    log:
        "logs/prepare_data.log",
    resources:
        **CPU_JOB,
    params:
        data=config["data"],
        max_len=config["model"]["max_len"],
        cache_dir="resources/hf_cache",
    script:
        "../scripts/prepare_data.py"
