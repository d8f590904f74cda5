rule paper:
    """The Markdown and LaTeX papers from one report model (compile_study/report/build.py) and the templates."""
    input:
        unpack(P.optional_inputs),
        unpack(P.call_log),
        unpack(P.kinds_input),
        templates=P.templates,
        summary=L.summary,
        parity=L.parity_table,
        claims=L.claims,
        decisions=L.decisions,
        environment=L.environment,
        facts=L.facts,
        config=L.config,
        figures=L.figures,
        host_effect=L.host_effect,
    output:
        md=report(
            L.paper("md"),
            caption="../report/paper.rst",
            category="Paper",
            labels={"format": "Markdown"},
        ),
        tex=L.paper("tex"),
    log:
        L.log("paper"),
    resources:
        **P.lanes.cpu_job,
    params:
        device=P.device,
        study=P.pool_member,
    script:
        "../scripts/render_paper.py"


rule paper_pdf:
    """The LaTeX paper -> PDF with latexmk (rule all asks for it only where latexmk is installed)."""
    input:
        tex=L.paper("tex"),
        figures=L.figures,
    output:
        report(
            L.paper("pdf"),
            caption="../report/paper.rst",
            category="Paper",
            labels={"format": "PDF"},
        ),
    log:
        L.log("paper_pdf"),
    resources:
        **P.lanes.cpu_job,
    script:
        "../scripts/paper_pdf.py"


rule study_readme:
    """The study directory's README.md: what it holds, which code and hardware made it, how it was run (its
    calls.jsonl), where its time went, its headline, its reproduction report's verdict, and how to remake it
    (compile_study/report/docs/readme.py).
    """
    input:
        unpack(P.call_log),
        unpack(P.test_records),
        unpack(P.reproduction_report),
        records=P.run_records,
        compiles=P.compile.records,
        environment=L.environment,
        facts=L.facts,
        paper=L.paper("md"),
    output:
        L.readme,
    log:
        L.log("study_readme"),
    resources:
        **P.lanes.cpu_job,
    params:
        rebuild=f"snakemake --cores all --directory {P.study_dir} --forcerun summarize",
        logs=P.call_logs,
    script:
        "../scripts/study_readme.py"
