"""The workflow's plan: the config checked and turned into jobs, inputs, outputs, params and resources
(`study.Plan`), and the repairs a study needs after a crash (`repairs`). The Snakefile and workflow/rules/*.smk
only wire rules to it; the top layer of the package (it reads every other one), torch-free.
"""
