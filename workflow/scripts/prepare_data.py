"""Snakemake shim for rule prepare_data (snakemake --cores all resources/data/facts.json)."""

import os
import sys

from compile_study.core.dataset.corpus import DataError
from compile_study.core.dataset.data import prepare
from compile_study.core.logs import redirect_output

redirect_output(snakemake.log[0])
out_dir = os.path.dirname(snakemake.output[0])
try:
    facts = prepare(snakemake.params.data, snakemake.params.max_len, out_dir, snakemake.params.cache_dir)
except DataError as e:  # bad input: the message names file and line; a traceback would add nothing
    sys.exit(f"data error: {e}")
print(facts["description"], *facts["notes"], sep="\n")
