"""Where a study's jobs run, a part of its plan (plan/study.py `Plan.lanes`): the host's lanes (a GPU each, with its
share of the cores), a timed job's threads and `timed_run` slots, whether a run's load may overlap its lane's timed
part, and each kind of job's cluster request. Torch-free.
"""

from __future__ import annotations

import functools

from compile_study.measure.process import isolation


class Lanes:
    """`config` the study's (validated), `device` its, `cores` Snakemake's; a stored study runs no timed job."""

    def __init__(self, config: dict, device: str, stored: bool, cores: int):
        self.config, self.device, self.stored = config, device, stored
        # a timed job's threads: its share of the cores where several GPUs run timed jobs at once
        # (`--resources timed_run=N`; each pins itself to a disjoint share, measure/process/isolation.py)
        self.gpus = isolation.count_gpus() if device == "cuda" and not stored else 1
        self.timed_threads = max(1, cores // max(1, self.gpus))

    @functools.cached_property
    def overlap(self) -> bool:
        """Whether a run's load may run beside its lane's timed run (config `overlap_loads`, for this host's share
        of the cores per GPU: measure/process/isolation.py overlaps)."""
        return not self.stored and isolation.overlaps(self.config.get("overlap_loads", "auto"), self.device,
                                                      self.timed_threads)

    @property
    def run_threads(self) -> int:
        """A run's threads (Snakemake's count and torch's): the lane's cores, or half of them where loads overlap
        timed work (the timed part on one half, the next run's load on the other), so that two runs fit."""
        return self.timed_threads // 2 if self.overlap else self.timed_threads

    @property
    def run_slots(self) -> int:
        """The `timed_run` slots a run holds: one, or none where loads overlap timed work and the host's lanes
        (measure/process/isolation.py Host) keep each lane to one timed part and one load; the other timed jobs
        hold one and every core of their lane, so no run shares the host with them."""
        return 0 if self.overlap else 1

    # --- cluster requests ----------------------------------------------------------------------------------
    def slurm_resources(self, partition: str, **request) -> dict:
        """A job's SLURM request (profiles/slurm reads it; local runs ignore it): site settings from config `cluster`."""
        site = self.config["cluster"]
        wanted = {"slurm_partition": site[partition], "slurm_account": site["account"]}
        return {k: v for k, v in (wanted | request).items() if v is not None}

    @property
    def cpu_job(self) -> dict:
        """CPU-only stages go to the CPU partition."""
        return self.slurm_resources("cpu_partition")

    def compile_job(self, cores: int) -> dict:
        """A job of the compile phase (a cold compile, a parity check) takes a compile's `cores` and, on a GPU
        study, a GPU (several compiles share one) on the compile partition (by default the GPU partition)."""
        cuda, site = self.device == "cuda", self.config["cluster"]
        partition = "compile_partition" if site["compile_partition"] else "gpu_partition" if cuda else "cpu_partition"
        return self.slurm_resources(partition, cpus_per_task=cores, gpu=1 if cuda else None,
                                    gpu_model=site["gpu_model"] if cuda else None, constraint=site["constraint"])

    @property
    def timed_job(self) -> dict:
        """A timed job takes a whole GPU and cores of its own, so that no other job shares its device or its cores
        (on a CPU grid: the cores alone, on the CPU partition)."""
        cuda, site = self.device == "cuda", self.config["cluster"]
        return self.slurm_resources("gpu_partition" if cuda else "cpu_partition", cpus_per_task=site["timed_cpus"],
                                    gpu=1 if cuda else None, gpu_model=site["gpu_model"] if cuda else None,
                                    constraint=site["constraint"])
