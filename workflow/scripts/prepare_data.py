"""Snakemake shim for rule prepare_data (snakemake --cores all resources/data/facts.json)."""

import os

from compile_study.data import prepare
from compile_study.logs import redirect_output

redirect_output(snakemake.log[0])
out_dir = os.path.dirname(snakemake.output[0])
facts = prepare(snakemake.params.data, snakemake.params.max_len, out_dir, snakemake.params.cache_dir)
print(facts["description"], *facts["notes"], sep="\n")
