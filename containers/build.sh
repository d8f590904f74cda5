#!/usr/bin/env bash
# Builds the study's image from containers/Dockerfile and saves it as a zstd-compressed archive.
#   containers/build.sh                 # CUDA image, compile-study:cuda, containers/build/compile-study-cuda.tar.zst
#   VARIANT=cpu containers/build.sh     # CPU image, compile-study:cpu (what CI tests)
# Settings (environment):
#   VARIANT  cuda (default) or cpu: which torch build the wheelhouse holds
#   BASE     a Debian bookworm image to build on, e.g. docker.io/library/debian:bookworm where a registry
#            is reachable; unset, a minimal bookworm is made locally with mmdebstrap (localhost/debian:bookworm)
#   ENGINE   podman (default) or docker
#   SAVE     1 (default) saves the archive; 0 skips it
#   PYTHON   the host's Python 3.11 that builds the wheelhouse (the image's Python is bookworm's 3.11)
set -euo pipefail
cd "$(dirname "$0")/.."

VARIANT=${VARIANT:-cuda}
ENGINE=${ENGINE:-podman}
SAVE=${SAVE:-1}
PYTHON=${PYTHON:-python3}
TAG=compile-study:$VARIANT
WORK=containers/build            # git-ignored: base rootfs, wheelhouses, contexts, archives
CONTEXT=$WORK/context-$VARIANT
mkdir -p "$WORK"
[[ $VARIANT == cuda || $VARIANT == cpu ]] || { echo "VARIANT must be cuda or cpu, not '$VARIANT'" >&2; exit 2; }

make_base() {  # a minimal Debian bookworm from Debian's own mirror: no container registry needed
    if [[ -n ${BASE:-} ]]; then return; fi
    BASE=localhost/debian:bookworm
    if "$ENGINE" image inspect "$BASE" >/dev/null 2>&1; then return; fi
    echo "== making $BASE with mmdebstrap"
    mmdebstrap --quiet --variant=minbase bookworm "$WORK/bookworm-rootfs.tar"
    "$ENGINE" import "$WORK/bookworm-rootfs.tar" "$BASE"
    rm "$WORK/bookworm-rootfs.tar"
}

pip_for_variant() {  # pip as this host is set up (cpu), or PyPI alone (cuda: its Linux torch is the CUDA build)
    if [[ $VARIANT == cuda ]]; then
        env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null "$WORK/pip-venv/bin/pip" "$@"
    else
        "$WORK/pip-venv/bin/pip" "$@"
    fi
}

make_wheelhouse() {  # every pinned package as a wheel for bookworm's Python 3.11, plus the project's own wheel
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
        || { echo "PYTHON must be a Python 3.11 (the image's); set PYTHON=python3.11" >&2; exit 2; }
    [[ -x $WORK/pip-venv/bin/pip ]] || "$PYTHON" -m venv "$WORK/pip-venv"
    mkdir -p "$CONTEXT/wheels" "$CONTEXT/project"
    cp requirements.txt "$CONTEXT/requirements.txt"
    # --find-links to the wheelhouse itself: wheels fetched by an earlier build are reused, not fetched again
    pip_for_variant wheel --quiet --wheel-dir "$CONTEXT/wheels" --find-links "$CONTEXT/wheels" -r requirements.txt
    rm -f "$CONTEXT"/project/*.whl
    # built from a copy, so that setuptools' build/ and egg-info stay out of the checkout
    rm -rf "$WORK/project-src" && mkdir -p "$WORK/project-src"
    cp -r pyproject.toml compile_study "$WORK/project-src/"
    "$WORK/pip-venv/bin/pip" wheel --quiet --no-deps --wheel-dir "$CONTEXT/project" "$WORK/project-src"
    local torch_version
    torch_version=$(sed -n 's/^torch==\([^ ]*\).*/\1/p' requirements.txt)
    local torch_wheel=("$CONTEXT"/wheels/torch-"$torch_version"*.whl)
    echo "torch wheel: $(basename "${torch_wheel[0]}")"
    if [[ $VARIANT == cpu && ${torch_wheel[0]} != *+cpu* ]]; then
        echo "note: this pip resolved torch to a non-CPU build (the image works, only larger); for the CPU" \
             "build set PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu" >&2
    fi
}

build_image() {
    local commit
    commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
    git diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
    local start=$SECONDS
    "$ENGINE" build --file containers/Dockerfile --tag "$TAG" --build-arg BASE="$BASE" \
        --build-arg VARIANT="$VARIANT" --build-arg COMMIT="$commit" "$CONTEXT"
    local size
    size=$("$ENGINE" image inspect --format '{{.Size}}' "$TAG")
    echo "image $TAG (commit $commit): built in $((SECONDS - start)) s, $((size / 1000000)) MB"
}

save_archive() {  # the archive Apptainer builds from (containers/compile-study.def) and a host without a registry loads
    local archive=$WORK/compile-study-$VARIANT.tar.zst
    local start=$SECONDS
    local format=()
    [[ $ENGINE == podman ]] && format=(--format docker-archive)  # Docker's layout, which every tool reads
    "$ENGINE" save "${format[@]}" "$TAG" | zstd --quiet -T0 -3 --force -o "$archive"
    echo "archive $archive: $(( $(stat -c %s "$archive") / 1000000 )) MB, saved in $((SECONDS - start)) s"
}

start=$SECONDS
make_base
echo "== wheelhouse ($VARIANT) in $CONTEXT"
make_wheelhouse
echo "== building $TAG on $BASE"
build_image
if [[ $SAVE == 1 ]]; then save_archive; fi
echo "containers/build.sh $VARIANT: done in $((SECONDS - start)) s"
