#!/usr/bin/env bash
# Builds the study's image from containers/Dockerfile and saves it as a zstd-compressed archive.
#   containers/build.sh                 # CUDA image, compile-study:cuda, containers/build/compile-study-cuda.tar.zst
#   VARIANT=cpu containers/build.sh     # CPU image, compile-study:cpu (what CI tests)
#   DOWNLOAD_ONLY=1 containers/build.sh # only the wheelhouse (a host with network, for a build elsewhere)
#   DRY_RUN=1 ENGINE=docker containers/build.sh  # prints the engine's build and save commands, runs nothing
# Settings (environment):
#   VARIANT  cuda (default) or cpu: which lock (locks/cuda.txt or locks/cpu.txt) the image installs
#   HUB      0 (default) or 1: also locks/hub.txt (datasets, pyarrow, ...: the `hf` data source); tag :VARIANT-hub
#   BASE     a Debian bookworm image to build on, e.g. docker.io/library/debian:bookworm where a registry
#            is reachable; unset, a minimal bookworm is made locally with mmdebstrap (localhost/debian:bookworm)
#   ENGINE   podman or docker (unset: podman where installed, else docker); docker needs BuildKit (the
#            Dockerfile's RUN --mount) and gives no reproducible image ID (podman's --timestamp has no twin there)
#   SAVE     1 (default) saves the archive; 0 skips it
#   PYTHON   the host's Python 3.11 that downloads the wheelhouse (the image's Python is bookworm's 3.11)
# Needs: podman (or docker), git, zstd, a Python 3.11, and mmdebstrap unless BASE is set.
set -euo pipefail
cd "$(dirname "$0")/.."
source containers/engine.sh

VARIANT=${VARIANT:-cuda}
HUB=${HUB:-0}
SAVE=${SAVE:-1}
DOWNLOAD_ONLY=${DOWNLOAD_ONLY:-0}
DRY_RUN=${DRY_RUN:-0}
PYTHON=${PYTHON:-python3}
NAME=$VARIANT$([[ $HUB == 1 ]] && echo -hub || true)
TAG=compile-study:$NAME
WORK=containers/build            # git-ignored: base rootfs, wheelhouses, contexts, archives
CONTEXT=$WORK/context-$VARIANT
ARCHIVE=$WORK/compile-study-$NAME.tar.zst
LOCAL_BASE=localhost/debian:bookworm
[[ $VARIANT == cuda || $VARIANT == cpu ]] || { echo "VARIANT must be cuda or cpu, not '$VARIANT'" >&2; exit 2; }
[[ $HUB == 0 || $HUB == 1 ]] || { echo "HUB must be 0 or 1, not '$HUB'" >&2; exit 2; }
# The commit's time: the image's created time and every file time in the layers this build writes
# (podman's --timestamp), so that a rebuild at the same commit gives the same image ID.
EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)
COMMIT=$(git rev-parse HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT-dirty"

make_base() {  # a minimal Debian bookworm from Debian's own mirror: no container registry needed
    if [[ -n ${BASE:-} ]]; then return; fi
    BASE=$LOCAL_BASE
    if "$ENGINE" image inspect "$BASE" >/dev/null 2>&1; then return; fi
    echo "== making $BASE with mmdebstrap"
    SOURCE_DATE_EPOCH=$EPOCH mmdebstrap --quiet --variant=minbase bookworm "$WORK/bookworm-rootfs.tar"
    "$ENGINE" import "$WORK/bookworm-rootfs.tar" "$BASE"
    rm "$WORK/bookworm-rootfs.tar"
}

make_context() {  # the locks, every locked file for bookworm's Python 3.11 (hash-checked), the project's source
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
        || { echo "PYTHON must be a Python 3.11 (the image's); set PYTHON=python3.11" >&2; exit 2; }
    [[ -x $WORK/pip-venv/bin/pip ]] || "$PYTHON" -m venv "$WORK/pip-venv"
    rm -rf "$CONTEXT/locks" "$CONTEXT/project"
    mkdir -p "$CONTEXT/wheels" "$CONTEXT/locks" "$CONTEXT/project"
    cp "locks/$VARIANT.txt" locks/hub.txt "$CONTEXT/locks/"
    local locks=(-r "locks/$VARIANT.txt")
    if [[ $HUB == 1 ]]; then locks+=(-r locks/hub.txt); fi
    # Wherever this host's pip looks (for the CPU lock it must offer torch's CPU build), only files whose
    # sha256 the lock names are taken; files already in the wheelhouse are not fetched again, and any the
    # locks do not name (an older build's) are removed first: the image's pip would try a local file
    # before the one the lock names and refuse it.
    local file
    for file in "$CONTEXT"/wheels/*; do
        [[ -f $file ]] || continue
        grep -q "sha256:$(sha256sum "$file" | cut -d' ' -f1)" locks/*.txt || rm "$file"
    done
    "$WORK/pip-venv/bin/pip" download --quiet --no-deps --require-hashes --dest "$CONTEXT/wheels" "${locks[@]}"
    cp -r pyproject.toml compile_study "$CONTEXT/project/"
    # The commit, in the project's layer: podman's cache keys a LABEL by its text, not by the build argument
    # in it, so without a changed layer below, a new commit's image would keep the old commit's labels.
    echo "$COMMIT" > "$CONTEXT/project/REVISION"
    find "$CONTEXT/project" -name __pycache__ -prune -exec rm -rf {} +
    find "$CONTEXT/project" -exec touch --no-dereference --date="@$EPOCH" {} +  # the same bytes and times for a commit
    echo "wheelhouse $CONTEXT/wheels: $(find "$CONTEXT/wheels" -type f | wc -l) files, $(( $(du -sb "$CONTEXT/wheels" | cut -f1) / 1000000 )) MB"
}

build_command() {  # BUILD: the engine's build command, with the flags this engine knows
    if [[ $ENGINE == podman ]]; then
        # --timestamp: the commit's time on the image and every file its layers write (the same image ID)
        BUILD=(podman build --layers --force-rm --timestamp "$EPOCH")
    else
        BUILD=(env DOCKER_BUILDKIT=1 docker build)  # BuildKit: the Dockerfile's RUN --mount
    fi
    BUILD+=(--file containers/Dockerfile --tag "$TAG" --build-arg BASE="$BASE" --build-arg VARIANT="$VARIANT"
        --build-arg HUB="$HUB" --build-arg COMMIT="$COMMIT" "$CONTEXT")
}

save_command() {  # SAVE_CMD: the engine's save command (its output goes through zstd into ARCHIVE)
    SAVE_CMD=("$ENGINE" save)
    [[ $ENGINE == podman ]] && SAVE_CMD+=(--format docker-archive)  # Docker's layout, which every tool reads
    SAVE_CMD+=("$TAG")
}

build_image() {
    local old new
    old=$("$ENGINE" image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)
    local start=$SECONDS
    build_command
    "${BUILD[@]}"
    new=$("$ENGINE" image inspect --format '{{.Id}}' "$TAG")
    # The image this tag named before is left untagged: remove it (its own layers go with it, the cached
    # ones the new image shares stay) unless another tag or a container still uses it.
    if [[ -n $old && $old != "$new" ]] && [[ -z $("$ENGINE" image inspect --format '{{join .RepoTags ""}}' "$old" 2>/dev/null) ]]; then
        "$ENGINE" rmi "$old" >/dev/null 2>&1 && echo "removed the previous $TAG, $old" || true
    fi
    echo "layers (size, instruction):"
    "$ENGINE" history --format '{{.Size}}\t{{.CreatedBy}}' "$TAG" | grep -v '^0 B' | cut -c1-110 | sed 's/^/    /'
    local size
    size=$("$ENGINE" image inspect --format '{{.Size}}' "$TAG")
    echo "image $TAG (commit $COMMIT): ID $new, built in $((SECONDS - start)) s, $((size / 1000000)) MB"
}

save_archive() {  # the archive Apptainer builds from (containers/compile-study.def) and a host without a registry loads
    local start=$SECONDS
    save_command
    "${SAVE_CMD[@]}" | zstd "${ZSTD[@]}"
    echo "archive $ARCHIVE: $(( $(stat -c %s "$ARCHIVE") / 1000000 )) MB, saved in $((SECONDS - start)) s"
}

dry_run() {  # the commands a build would run, as typed, after the base and the context are made
    BASE=${BASE:-$LOCAL_BASE}
    build_command
    shown "${BUILD[@]}"
    save_command
    if [[ $SAVE == 1 ]]; then echo "$(shown "${SAVE_CMD[@]}") | $(shown zstd "${ZSTD[@]}")"; fi
}

ZSTD=(--quiet -T0 -3 --force -o "$ARCHIVE")
start=$SECONDS
if [[ $DOWNLOAD_ONLY == 1 ]]; then
    mkdir -p "$WORK" && make_context && echo "containers/build.sh: wheelhouse done in $((SECONDS - start)) s"
    exit 0
fi
find_engine
if [[ $DRY_RUN == 1 ]]; then dry_run; exit 0; fi
engine_answers || exit 2
mkdir -p "$WORK"
make_base
podman_settings "$BASE"
echo "== build context ($NAME) in $CONTEXT"
make_context
echo "== building $TAG on $BASE"
build_image
if [[ $SAVE == 1 ]]; then save_archive; fi
echo "containers/build.sh $NAME: done in $((SECONDS - start)) s"
