"""Snakemake shim for rule study_config (snakemake --cores all results/cpu/config.yaml)."""

import yaml

from compile_study.core.io import write_text_atomic

write_text_atomic(snakemake.output[0], yaml.safe_dump(dict(snakemake.params.config), sort_keys=False))
