"""containers/build.sh and containers/run.sh: the commands they give each engine, and what they say when a host
lacks a piece. build.sh's dry run needs no engine; run.sh runs against a scripted engine on PATH (it answers
`info`, `image inspect` and a probe `run` as this module says), so every branch is checked on any host. The real
engine runs them in CI (.ci/container.sh: podman builds, tests and a tiny study through run.sh)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import REPO

# What podman printed when it could not start a container on hosts that need .ci/containers.conf
RUNC_RLIMIT = ("Error: runc: runc create failed: unable to start container process: error during container init: "
               "error setting rlimits for ready process: error setting rlimit type 7: operation not permitted: "
               "OCI permission denied")
CRUN_RLIMIT = "Error: crun: setrlimit `RLIMIT_NOFILE`: Operation not permitted: OCI permission denied"
CRUN_CGROUP = "Error: OCI runtime error: crun: cgroups in hybrid mode not supported, drop all controllers from cgroupv2"


def commit() -> tuple[str, str]:
    """The commit build.sh names (with -dirty for a changed tree) and its time."""
    git = ["git", "-C", str(REPO)]
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run([*git, "diff", "--quiet", "HEAD"]).returncode != 0
    epoch = subprocess.run([*git, "log", "-1", "--format=%ct"], capture_output=True, text=True, check=True).stdout
    return sha + ("-dirty" if dirty else ""), epoch.strip()


def build_dry_run(**env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "containers/build.sh"], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env=os.environ | {"DRY_RUN": "1"} | env)


@pytest.mark.unit
def test_build_gives_docker_only_the_flags_it_knows():
    sha, _ = commit()
    res = build_dry_run(ENGINE="docker", VARIANT="cpu")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "env DOCKER_BUILDKIT=1 docker build --file containers/Dockerfile --tag compile-study:cpu "
        f"--build-arg BASE=localhost/debian:bookworm --build-arg VARIANT=cpu --build-arg HUB=0 --build-arg COMMIT={sha} "
        "containers/build/context-cpu",
        "docker save compile-study:cpu | zstd --quiet -T0 -3 --force -o containers/build/compile-study-cpu.tar.zst",
    ]


@pytest.mark.unit
def test_build_gives_podman_its_reproducible_flags():
    sha, epoch = commit()
    res = build_dry_run(ENGINE="podman", VARIANT="cuda", HUB="1", SAVE="0", BASE="docker.io/library/debian:bookworm")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        f"podman build --layers --force-rm --timestamp {epoch} --file containers/Dockerfile --tag compile-study:cuda-hub "
        f"--build-arg BASE=docker.io/library/debian:bookworm --build-arg VARIANT=cuda --build-arg HUB=1 "
        f"--build-arg COMMIT={sha} containers/build/context-cuda",
    ]


@pytest.mark.unit
@pytest.mark.parametrize("env, message", [({"ENGINE": "buildah"}, "ENGINE must be podman or docker, not 'buildah'"),
                                          ({"VARIANT": "rocm"}, "VARIANT must be cuda or cpu, not 'rocm'")])
def test_build_refuses_a_bad_setting_before_any_work(env, message):
    res = build_dry_run(**env)
    assert res.returncode == 2 and message in res.stderr and res.stdout == ""


ENGINE_SCRIPT = """#!/bin/bash
# A container engine as run.sh sees it: what it answers is set by the test that wrote it.
probe_error='{probe_error}'
case "$1" in
    info) if [[ $2 == --format ]]; then echo '{runtimes}'; fi; exit 0 ;;
    image) for name in {images}; do [[ ${{@: -1}} == "$name" ]] && exit 0; done; exit 1 ;;
    run) if [[ -z ${{CONTAINERS_CONF:-}} && -n $probe_error ]]; then echo "$probe_error" >&2; exit 126; fi; exit 0 ;;
esac
exit 3
"""


# The host's own tools that would answer in place of the scripted ones: on a GPU host (nvidia-smi lists its GPUs)
# or one with an engine installed, run.sh would otherwise take the real host's answers.
HOST_ONLY = ("nvidia-smi", "nvidia-ctk", "podman", "docker")


@pytest.fixture(scope="session")
def system_bin(tmp_path_factory) -> Path:
    """The system's /usr/bin and /bin as links, less the GPU and engine tools: a host with none of them."""
    links = tmp_path_factory.mktemp("system-bin")
    for directory in (Path("/bin"), Path("/usr/bin")):
        for path in directory.iterdir():
            link = links / path.name
            if path.name not in HOST_ONLY and not link.exists() and os.access(path, os.X_OK):
                link.symlink_to(path)
    return links


@pytest.fixture
def host(tmp_path, system_bin):
    """A project with containers/ beside a ../shared, and a bin/ of scripted host tools (PATH: bin, then the system's
    without its GPU and engine tools)."""
    project, bin_dir = tmp_path / "project", tmp_path / "bin"
    (project / "containers").mkdir(parents=True)
    bin_dir.mkdir()
    (bin_dir / ".system").symlink_to(system_bin)
    (tmp_path / "shared").mkdir()
    for name in ("run.sh", "engine.sh"):
        shutil.copy(REPO / "containers" / name, project / "containers" / name)
    return project, bin_dir


def tool(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text(script)
    path.chmod(0o755)


def engine(bin_dir, name="podman", images=("compile-study:cpu",), probe_error="", runtimes='{"runc":{}}'):
    tool(bin_dir, name, ENGINE_SCRIPT.format(images=" ".join(images), probe_error=probe_error, runtimes=runtimes))


def run_sh(project, bin_dir, *args, **env) -> subprocess.CompletedProcess:
    env = {"PATH": f"{bin_dir}:{bin_dir / '.system'}", "DRY_RUN": "1", "HOME": str(project)} | env
    return subprocess.run(["bash", "containers/run.sh", *args], cwd=project, capture_output=True, text=True,
                          timeout=60, env=env)


def user() -> str:
    return f"--user {os.getuid()}:{os.getgid()}" if os.getuid() == 0 else "--userns=keep-id"


@pytest.mark.unit
def test_run_mounts_the_project_and_shared_and_runs_the_task(host):
    project, bin_dir = host
    engine(bin_dir, "docker", images=["localhost/compile-study:cpu"])  # as `docker load` names podman's archive
    res = run_sh(project, bin_dir, "study", "--configfile", "config.yaml", ".ci/tiny-study.yaml", ENGINE="docker")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == (f"docker run --rm --user {os.getuid()}:{os.getgid()} -v {project}:/study "
                                  f"-v {project.parent / 'shared'}:/shared:ro localhost/compile-study:cpu "
                                  "snakemake --cores all --configfile config.yaml .ci/tiny-study.yaml")
    assert "no GPU" in res.stderr
    res = run_sh(project, bin_dir, "test", "-m", "unit", ENGINE="docker")
    assert res.stdout.strip().endswith("localhost/compile-study:cpu python -m pytest -m unit")


@pytest.mark.unit
def test_run_says_which_image_to_build_or_load(host):
    project, bin_dir = host
    engine(bin_dir, "podman", images=[])
    res = run_sh(project, bin_dir, "test")
    assert res.returncode == 2 and res.stdout == ""
    assert ("podman has no image compile-study:cpu: build it (VARIANT=cpu containers/build.sh) or load its archive "
            "(zstd -dc containers/build/compile-study-cpu.tar.zst | podman load)") in res.stderr


@pytest.mark.unit
@pytest.mark.parametrize("error", [RUNC_RLIMIT, CRUN_RLIMIT, CRUN_CGROUP])
def test_run_applies_the_podman_settings_where_the_host_refuses_the_defaults(host, error):
    project, bin_dir = host
    engine(bin_dir, "podman", probe_error=error)
    res = run_sh(project, bin_dir, "test")
    assert res.returncode == 0, res.stderr
    conf = project / ".ci/containers.conf"
    assert res.stdout.startswith(f"CONTAINERS_CONF={conf} podman run --rm {user()} -v {project}:/study ")
    assert error in res.stderr and f"export CONTAINERS_CONF={conf}" in res.stderr


@pytest.mark.unit
def test_run_stops_on_a_podman_error_it_does_not_know(host):
    project, bin_dir = host
    engine(bin_dir, "podman", probe_error="Error: short-name resolution enforced")
    res = run_sh(project, bin_dir, "test")
    assert res.returncode == 2 and res.stdout == ""
    assert "podman cannot start a container from compile-study:cpu: Error: short-name resolution enforced" in res.stderr


@pytest.mark.unit
def test_run_without_shared_says_the_study_uses_the_stand_in(host):
    project, bin_dir = host
    (project.parent / "shared").rmdir()
    engine(bin_dir, "podman")
    res = run_sh(project, bin_dir, "study")
    assert res.returncode == 0 and "/shared" not in res.stdout
    assert "no ../shared beside the project: the study falls back to the synthetic stand-in" in res.stderr


NVIDIA_SMI = "#!/bin/bash\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'\n"


@pytest.mark.unit
@pytest.mark.parametrize("name", ["podman", "docker"])
def test_gpu_check_names_every_missing_piece_and_its_command(host, name):
    project, bin_dir = host
    engine(bin_dir, name, images=["compile-study:cuda"])
    res = run_sh(project, bin_dir, "gpu-check", ENGINE=name)
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert lines[0] == f"no GPU for a container here ({name}); missing:"
    assert "the NVIDIA driver (R580 or newer, for the image's CUDA 13.0): nvidia-smi lists no GPU" in lines[1]
    assert "the NVIDIA Container Toolkit (no nvidia-ctk): apt-get install -y nvidia-container-toolkit" in lines[2]
    then = ("nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml" if name == "podman" else
            "nvidia-ctk runtime configure --runtime=docker && systemctl restart docker")
    assert lines[3].startswith("  - then ") and lines[3].endswith(then) and len(lines) == 4


@pytest.mark.unit
def test_gpu_check_with_the_toolkit_but_no_cdi_spec_names_the_command_that_makes_it(host):
    project, bin_dir = host
    engine(bin_dir, "podman", images=["compile-study:cuda"])
    tool(bin_dir, "nvidia-smi", NVIDIA_SMI)
    tool(bin_dir, "nvidia-ctk", "#!/bin/bash\necho 'INFO[0000] Found 0 CDI devices' >&2\n")
    res = run_sh(project, bin_dir, "gpu-check")
    assert res.returncode == 2
    assert res.stderr.splitlines()[1:] == ["  - a CDI spec naming the GPUs, which podman reads: "
                                           "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"]


@pytest.mark.unit
@pytest.mark.parametrize("name, flags", [("podman", "--device nvidia.com/gpu=all --security-opt=label=disable"),
                                         ("docker", "--runtime=nvidia --gpus all")])
def test_a_gpu_host_runs_the_cuda_image_on_its_gpus(host, name, flags):
    project, bin_dir = host
    engine(bin_dir, name, images=["compile-study:cuda", "compile-study:cpu"], runtimes='{"nvidia":{},"runc":{}}')
    tool(bin_dir, "nvidia-smi", NVIDIA_SMI)
    tool(bin_dir, "nvidia-ctk", "#!/bin/bash\necho nvidia.com/gpu=0; echo nvidia.com/gpu=all\n")
    res = run_sh(project, bin_dir, "study", ENGINE=name)
    assert res.returncode == 0, res.stderr
    assert f" {flags} -v {project}:/study " in res.stdout
    assert res.stdout.strip().endswith("compile-study:cuda snakemake --cores all")
    check = run_sh(project, bin_dir, "gpu-check", ENGINE=name).stdout
    assert check.strip().endswith("compile-study:cuda sh -c 'nvidia-smi && python -c \"import torch; print(torch.__version__, "
                                  "torch.version.cuda, torch.cuda.is_available()); print(torch.cuda.get_device_name(0))\"'")
    cpu = run_sh(project, bin_dir, "study", ENGINE=name, GPU="0").stdout
    assert flags not in cpu and cpu.strip().endswith("compile-study:cpu snakemake --cores all")
