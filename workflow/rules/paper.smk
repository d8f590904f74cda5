rule paper:
    """The Markdown and LaTeX papers from one report model (compile_study/report/build.py) and the templates."""
    input:
        unpack(optional_inputs),
        unpack(call_log),
        templates=TEMPLATES,
        summary=L.summary,
        parity=L.parity_table,
        claims=L.claims,
        decisions=L.decisions,
        environment=L.environment,
        facts=L.facts,
        config=L.config,
        figures=L.figures,
    output:
        md=L.paper("md"),
        tex=L.paper("tex"),
    log:
        L.log("paper"),
    resources:
        **CPU_JOB,
    params:
        device=DEVICE,
    script:
        "../scripts/render_paper.py"


rule paper_pdf:
    """The LaTeX paper -> PDF with latexmk (rule all asks for it only where latexmk is installed)."""
    input:
        tex=L.paper("tex"),
        figures=L.figures,
    output:
        L.paper("pdf"),
    log:
        L.log("paper_pdf"),
    resources:
        **CPU_JOB,
    script:
        "../scripts/paper_pdf.py"


rule study_readme:
    """The study directory's README.md: what it holds, which code and hardware made it, how it was run (its
    calls.jsonl), where its time went, its headline, its reproduction report's verdict, and how to remake it
    (compile_study/report/readme.py).
    """
    input:
        unpack(call_log),
        unpack(test_records),
        unpack(reproduction_report),
        records=run_records,
        environment=L.environment,
        facts=L.facts,
        paper=L.paper("md"),
    output:
        L.readme,
    log:
        L.log("study_readme"),
    resources:
        **CPU_JOB,
    params:
        rebuild=f"snakemake --cores all --directory {STUDY_DIR} --forcerun summarize",
        logs=CALL_LOGS,
    script:
        "../scripts/study_readme.py"
