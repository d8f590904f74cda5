# shellcheck shell=bash
# The container engine, as build.sh and run.sh find it (sourced by both; not run on its own).
#   find_engine          ENGINE as given, else podman where installed, else docker
#   podman_settings IMG  where podman cannot start a container with its defaults, CI's settings instead
#   shown CMD...         CMD as one would type it (DRY_RUN's output)

# Where podman fails like this, the host's limits or cgroup layout refuse its defaults (CI's sandbox is one):
# runc cannot set the default rlimits ("error setting rlimit type 7"), crun cannot either ("setrlimit
# `RLIMIT_NOFILE`") and, given limits it may set, fails on the hybrid cgroup layout ("cgroups in hybrid mode
# not supported"). .ci/containers.conf chooses runc and limits such a sandbox allows; one without the other
# is not enough.
PODMAN_HOST_ERRORS='error setting rlimit|setrlimit|cgroups in hybrid mode'
PODMAN_CONF=.ci/containers.conf

die() { echo "$*" >&2; exit 2; }

shown() {  # a command as one would type it (an argument with other characters than these in single quotes)
    local arg words=() q="'"
    for arg; do
        if [[ $arg =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then words+=("$arg"); else words+=("$q${arg//$q/$q\\$q$q}$q"); fi
    done
    echo "${words[*]}"
}

find_engine() {
    if [[ -n ${ENGINE:-} ]]; then
        [[ $ENGINE == podman || $ENGINE == docker ]] || die "ENGINE must be podman or docker, not '$ENGINE'"
    elif command -v podman >/dev/null; then
        ENGINE=podman
    elif command -v docker >/dev/null; then
        ENGINE=docker
    else
        die "neither podman nor docker is installed: apt-get install -y podman (README, \"In the container\")"
    fi
}

engine_answers() {  # the engine's client is installed and its daemon (docker's) answers; else says why
    command -v "$ENGINE" >/dev/null || { echo "ENGINE=$ENGINE, but $ENGINE is not installed" >&2; return 1; }
    local err
    err=$("$ENGINE" info 2>&1 >/dev/null) || { echo "$ENGINE does not answer ('$ENGINE info': ${err:0:300})" >&2; return 1; }
}

podman_settings() {  # IMG: an image the engine has; exports CONTAINERS_CONF where the host needs it
    [[ $ENGINE == podman && -z ${CONTAINERS_CONF:-} ]] || return 0
    local err
    err=$(podman run --rm --network none "$1" true 2>&1) && return 0
    if ! grep -qE "$PODMAN_HOST_ERRORS" <<<"$err"; then
        die "podman cannot start a container from $1: $err"
    fi
    echo "podman cannot start a container with this host's defaults:" >&2
    grep -E "$PODMAN_HOST_ERRORS" <<<"$err" | head -1 | cut -c1-240 | sed 's/^/    /' >&2
    echo "so its settings come from $PODMAN_CONF (runc, lower rlimits): export CONTAINERS_CONF=$PWD/$PODMAN_CONF to say so yourself" >&2
    export CONTAINERS_CONF=$PWD/$PODMAN_CONF
    err=$(podman run --rm --network none "$1" true 2>&1) \
        || die "podman fails with $PODMAN_CONF too (it needs runc: apt-get install -y runc): $err"
}
