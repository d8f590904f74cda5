#!/usr/bin/env bash
# CI, in the container: builds the CPU image with containers/build.sh and podman (twice: the same ID), then runs
# inside it through containers/run.sh, as README's "In the container" says (project read-write at /study,
# ../shared read-only at /shared), the tests and a tiny end-to-end study whose paper must name the real data,
# and makes that study's Snakemake report, which must show every figure.
#   bash .ci/container.sh      (as root, from a clone with ../shared beside it)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -e results ]]; then  # never mix the tiny study into a checkout's own results
    echo "results/ exists: run .ci/container.sh from a clean clone" >&2; exit 1
fi

apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    podman buildah runc fuse-overlayfs uidmap mmdebstrap slirp4netns zstd >/dev/null
# No CONTAINERS_CONF here: build.sh and run.sh find that this sandbox needs .ci/containers.conf, and say so.
export ENGINE=podman GPU=0

VARIANT=cpu containers/build.sh
# A rebuild at the same commit is the same image (README, "In the container"), and leaves nothing untagged
first=$(podman image inspect --format '{{.Id}}' compile-study:cpu)
VARIANT=cpu SAVE=0 containers/build.sh 2>&1 | grep -E "^(image|containers/build.sh)"
second=$(podman image inspect --format '{{.Id}}' compile-study:cpu)
echo "image ID of the first build: $first; of a rebuild at the same commit: $second"
[[ $first == "$second" ]]
[[ -z $(podman images --quiet --filter dangling=true) ]]

containers/run.sh shell -c "python -c \"import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__)\""

# The host's run of the README's test command (.ci/run) has already run every tier on these sources, with the
# same lock; the image adds only what the image itself can get wrong: its Python and packages importing and
# compiling (the unit tier, then one test of each heavier tier: a compile, the real DAG dry-run, a golden
# rebuild), and the tiny study below. Every tier again here would double CI's time for nothing new.
rm -rf .pytest_cache  # the host's Inductor cache stays outside: the tests inside compile for themselves
start=$SECONDS
containers/run.sh test -m unit
containers/run.sh test -m "compile or dag or golden" \
    "tests/test_train.py::test_compiled_losses_match_eager" \
    "tests/test_workflow.py::test_dry_run_lists_every_stage_and_the_whole_grid" \
    "tests/test_rebuild.py::test_a_stored_study_rebuilds_byte_identical_through_the_dag"
echo "tests inside the container: $((SECONDS - start)) s"

start=$SECONDS
containers/run.sh study --configfile config.yaml .ci/tiny-study.yaml
paper=results/cpu/paper.md
grep -q "AG News test split (7,600 rows)" $paper  # ../shared was mounted where config.yaml looks
grep -q "These are CPU numbers" $paper
test -s results/cpu/paper.pdf  # rule paper_pdf, with the image's latexmk
echo "tiny study inside the container: results/cpu/paper.md, paper.tex and paper.pdf in $((SECONDS - start)) s"

# Snakemake's own report of the tiny study: the paper, every figure with its caption, the tables, the software
# the records name, the rules and their run times (captions in workflow/report/)
start=$SECONDS
containers/run.sh study --configfile config.yaml .ci/tiny-study.yaml --report results/cpu/report.html
for figure in $(python3 -c 'import json; print(*json.load(open("results/cpu/figures/index.json")))'); do
    grep -q "\"$figure.png\"" results/cpu/report.html || { echo "the report lacks figures/$figure.png" >&2; exit 1; }
done
echo "the tiny study's Snakemake report: results/cpu/report.html in $((SECONDS - start)) s"
