rule paper:
    """The Markdown and LaTeX papers from one report model (compile_study/report.py) and the templates."""
    input:
        unpack(optional_inputs),
        templates=TEMPLATES,
        summary=L.summary,
        parity=L.parity_table,
        claims=L.claims,
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
