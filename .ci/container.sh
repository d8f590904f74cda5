#!/usr/bin/env bash
# CI, in the container: builds the CPU image with containers/build.sh (twice: the same ID), then runs inside
# it, with the mounts README's "In the container" gives (project read-write at /study, ../shared read-only at
# /shared), the README's test command and a tiny end-to-end study whose paper must name the real data.
#   bash .ci/container.sh      (as root, from a clone with ../shared beside it)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -e results ]]; then  # never mix the tiny study into a checkout's own results
    echo "results/ exists: run .ci/container.sh from a clean clone" >&2; exit 1
fi

apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    podman buildah runc fuse-overlayfs uidmap mmdebstrap slirp4netns zstd >/dev/null
export CONTAINERS_CONF=$PWD/.ci/containers.conf  # runc and rlimits this sandbox allows

VARIANT=cpu containers/build.sh
# A rebuild at the same commit is the same image (README, "In the container"), and leaves nothing untagged
first=$(podman image inspect --format '{{.Id}}' compile-study:cpu)
VARIANT=cpu SAVE=0 containers/build.sh 2>&1 | grep -E "^(image|containers/build.sh)"
second=$(podman image inspect --format '{{.Id}}' compile-study:cpu)
echo "image ID of the first build: $first; of a rebuild at the same commit: $second"
[[ $first == "$second" ]]
[[ -z $(podman images --quiet --filter dangling=true) ]]

# The README's run line, with the command after the image.
in_container() {
    podman run --rm --user "$(id -u):$(id -g)" -v "$PWD":/study -v "$PWD/../shared":/shared:ro \
        compile-study:cpu "$@"
}
in_container python -c "import sys, torch, snakemake; print(sys.version.split()[0], 'torch', torch.__version__)"

rm -rf .pytest_cache  # the host's Inductor cache stays outside: the tests inside compile for themselves
start=$SECONDS
in_container python -m pytest
echo "tests inside the container: $((SECONDS - start)) s"

start=$SECONDS
in_container snakemake --cores all --configfile config.yaml .ci/tiny-study.yaml
paper=results/cpu/paper.md
grep -q "AG News test split (7,600 rows)" $paper  # ../shared was mounted where config.yaml looks
grep -q "These are CPU numbers" $paper
test -s results/cpu/paper.pdf  # rule paper_pdf, with the image's latexmk
echo "tiny study inside the container: results/cpu/paper.md, paper.tex and paper.pdf in $((SECONDS - start)) s"
