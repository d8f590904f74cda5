PAPER_TEX_TEMPLATE = os.path.join(
    workflow.basedir, "paper", "templates", "paper.tex.j2"
)


rule paper:
    """Fill the Jinja2 templates (Markdown and LaTeX) with the summary, the claims, the figures and the data/environment facts."""
    input:
        template=PAPER_TEMPLATE,
        tex_template=PAPER_TEX_TEMPLATE,
        summary=f"results/{DEVICE}/summary.csv",
        parity=f"results/{DEVICE}/parity.csv",
        claims=f"results/{DEVICE}/claims.csv",
        environment=f"results/{DEVICE}/environment.json",
        facts=f"{DATA_DIR}/facts.json",
        figures=rules.figures.output,
    output:
        md="paper/paper.md",
        tex="paper/paper.tex",
    log:
        f"logs/{DEVICE}/paper.log",
    resources:
        **CPU_JOB,
    params:
        config=config,
        device=DEVICE,
    script:
        "../scripts/render_paper.py"
