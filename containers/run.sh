#!/usr/bin/env bash
# Runs the study's image with the project read-write at /study and ../shared read-only at /shared (README,
# "In the container"), on the GPUs where the host has them:
#   containers/run.sh study [snakemake arguments]  # snakemake --cores all (the GPU grid where a GPU is found)
#   containers/run.sh test [pytest arguments]      # python -m pytest (all tiers; what CI runs)
#   containers/run.sh shell [bash arguments]       # a shell in the image (interactive without arguments)
#   containers/run.sh gpu-check                    # nvidia-smi and torch.cuda.is_available() in the image
# Settings (environment):
#   ENGINE   podman or docker (unset: podman where installed, else docker)
#   GPU      auto (default: the GPUs where nvidia-smi lists one), 1 (the GPUs, or say what is missing), 0 (none)
#   IMAGE    the image (unset: compile-study:cuda with the GPUs, compile-study:cpu without, under whichever
#            name the engine loaded it: podman's archive names it localhost/compile-study:...)
#   DRY_RUN  1 prints the engine's command instead of running it
set -euo pipefail
cd "$(dirname "$0")/.."
source containers/engine.sh

usage="usage: containers/run.sh study|test|shell|gpu-check [arguments]"
[[ $# -ge 1 ]] || die "$usage"
TASK=$1
shift
case $TASK in
    study) INSIDE=(snakemake --cores all "$@") ;;
    test) INSIDE=(python -m pytest "$@") ;;
    shell) INSIDE=(bash "$@") ;;
    gpu-check)
        GPU=1
        INSIDE=(sh -c 'nvidia-smi && python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available()); print(torch.cuda.get_device_name(0))"')
        ;;
    *) die "$usage" ;;
esac
GPU=${GPU:-auto}
[[ $GPU == auto || $GPU == 1 || $GPU == 0 ]] || die "GPU must be auto, 1 or 0, not '$GPU'"

host_gpus() {  # how many GPUs the host's driver lists (0 where there is no driver)
    local n=0
    if command -v nvidia-smi >/dev/null; then n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
    echo "$n"
}

gpu_flags() {  # GPU_FLAGS: how this engine hands the GPUs to a container; else every missing piece and its command
    local missing=() spec runtime
    spec="a CDI spec naming the GPUs, which podman reads: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
    runtime="Docker's nvidia runtime: nvidia-ctk runtime configure --runtime=docker && systemctl restart docker"
    [[ $(host_gpus) -gt 0 ]] \
        || missing+=("the NVIDIA driver (R580 or newer, for the image's CUDA 13.0): nvidia-smi lists no GPU")
    if ! command -v nvidia-ctk >/dev/null; then
        missing+=("the NVIDIA Container Toolkit (no nvidia-ctk): apt-get install -y nvidia-container-toolkit, from NVIDIA's repository (README, \"A GPU host\")")
        if [[ $ENGINE == podman ]]; then missing+=("then $spec"); else missing+=("then $runtime"); fi
    elif [[ $ENGINE == podman ]]; then
        nvidia-ctk cdi list 2>/dev/null | grep -q 'nvidia.com/gpu=all' || missing+=("$spec")
    else
        docker info --format '{{json .Runtimes}}' | grep -q '"nvidia"' || missing+=("$runtime")
    fi
    if [[ ${#missing[@]} -gt 0 ]]; then
        echo "no GPU for a container here ($ENGINE); missing:" >&2
        printf '  - %s\n' "${missing[@]}" >&2
        exit 2
    fi
    if [[ $ENGINE == podman ]]; then
        # label=disable as in the toolkit's own podman example: SELinux would keep the driver's files out
        GPU_FLAGS=(--device nvidia.com/gpu=all --security-opt=label=disable)
    else
        GPU_FLAGS=(--runtime=nvidia --gpus all)  # the toolkit's own Docker example
    fi
}

find_image() {  # IMAGE: the first of these names the engine has
    local variant=$1 name
    for name in ${IMAGE:-"compile-study:$variant" "localhost/compile-study:$variant"}; do
        if [[ $ANSWERS == 0 ]] || "$ENGINE" image inspect "$name" >/dev/null 2>&1; then IMAGE=$name; return; fi
    done
    die "$ENGINE has no image ${IMAGE:-compile-study:$variant}: build it (VARIANT=$variant containers/build.sh) or load its archive (zstd -dc containers/build/compile-study-$variant.tar.zst | $ENGINE load)"
}

DRY_RUN=${DRY_RUN:-0}
find_engine
ANSWERS=1
if ! engine_answers; then
    [[ $DRY_RUN == 1 ]] || exit 2
    ANSWERS=0  # a dry run goes on: the image's name and podman's settings are then not checked
    echo "(so the image's name is not checked)" >&2
fi
GPU_FLAGS=()
if [[ $GPU == auto ]]; then GPU=$([[ $(host_gpus) -gt 0 ]] && echo 1 || echo 0); fi
if [[ $GPU == 1 ]]; then
    gpu_flags
    find_image cuda
else
    find_image cpu
    echo "no GPU (nvidia-smi lists none, or GPU=0): $IMAGE on the CPU" >&2
fi
if [[ $ANSWERS == 1 ]]; then podman_settings "$IMAGE"; fi

RUN=("$ENGINE" run --rm)
if [[ -t 0 && -t 1 ]]; then RUN+=(-it); fi
if [[ $ENGINE == podman && $(id -u) != 0 ]]; then
    RUN+=(--userns=keep-id)  # rootless podman: the caller's uid inside, so the project's files stay theirs
else
    RUN+=(--user "$(id -u):$(id -g)")
fi
RUN+=("${GPU_FLAGS[@]}" -v "$PWD:/study")
if [[ -d ../shared ]]; then
    RUN+=(-v "$(realpath ../shared):/shared:ro")
else
    echo "warning: no ../shared beside the project: the study falls back to the synthetic stand-in for AG News" >&2
fi
RUN+=("$IMAGE" "${INSIDE[@]}")

if [[ $DRY_RUN == 1 ]]; then
    [[ -z ${CONTAINERS_CONF:-} ]] || printf 'CONTAINERS_CONF=%q ' "$CONTAINERS_CONF"
    shown "${RUN[@]}"
    exit 0
fi
exec "${RUN[@]}"
