"""``hydra/launcher=ray``: the jobs of a ``-m`` sweep as parallel Ray tasks.

For both apps, on a private local Ray (``hydra.launcher.address=null``, the default
with ``cluster=local`` and for the simulator) or on the cluster at an address (the
default with ``cluster=ray`` is its ``cluster.address``). Each job is one Ray task
that runs the job exactly as the basic launcher would (``hydra.core.utils.run_job``:
same config, same output directory, same logging, same W&B group), from the
launcher's working directory, so relative paths mean the same. A simulator job's task
composes its config itself, as the basic launcher does before each job: composed here,
all of them before the first job, they held every job back by about 2 s of a 12-job
sweep. On a cluster of several machines the sweep directory must be on a file system
every node sees.

A training job's driver starts its worker actors from inside its task: the task is
already connected to the cluster, so the actors join it and reserve their CPUs/GPUs in
the job's placement group (:mod:`gclab.runtime.placement`); the task itself reserves
no CPU by default, because the driver computes only while its actors wait. A
simulator job's task reserves one CPU. At most as many jobs are in flight as the
cluster holds at once, each with the largest reservation of any job of the sweep (and
at most ``max_parallel``); the rest wait their turn here. So no job waits for another's
resources inside Ray, where its start-up deadline (``cluster.timeout``) would run out.
The private local Ray runs its worker processes at niceness 0, the priority the jobs
have in a serial sweep (Ray's default, 15, is for background work: on a shared machine
its tasks lose the cores to every other process and the parallel sweep was slower than
the serial one).

gclab records a failing job in its ``error.txt`` and returns; a job whose process
dies (out of memory, a crash) gets its ``error.txt`` from here, the other jobs go on,
and Hydra reports the failure when the sweep ends. ``hydra-ray-launcher`` 1.2.2 does
not fit: it reserves one CPU per job for drivers whose actors then wait for CPUs
forever, starts Ray with the dashboard on all interfaces, stops collecting at the
first failed job and writes no ``error.txt``.
"""

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import (
    JobReturn,
    JobStatus,
    configure_log,
    filter_overrides,
    run_job,
    setup_globals,
)
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from hydra_zen import builds
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)

# Ray is imported where it is used: Hydra imports every plugin module at each start of
# either app, and the simulator does not need Ray otherwise.

#: The ``_target_`` of a training job's cluster: its actors reserve its resources.
TRAINING_CLUSTER = "gclab.runtime.cluster.Cluster"


@dataclass(frozen=True)
class Job:
    """One job of the sweep: its number and its overrides."""

    idx: int
    overrides: list[str]


def compose(hydra_context: HydraContext, primary: DictConfig, job: Job) -> DictConfig:
    """``job``'s config from the sweep's primary config, numbered as the basic launcher does."""
    config = hydra_context.config_loader.load_sweep_config(primary, job.overrides)
    with open_dict(config):
        config.hydra.job.id = job.idx
        config.hydra.job.num = job.idx
    return config


class RayLauncher(Launcher):
    """Runs a sweep's jobs as Ray tasks (module docstring).

    ``address``: the Ray cluster (null: a private local Ray); ``num_cpus``: per job
    (null: 0 for training, 1 for the simulator); ``num_gpus``: per job's driver (its
    worker actors reserve their own); ``max_parallel``: jobs in flight (null: as many
    as the cluster holds).
    """

    def __init__(
        self,
        address: str | None = None,
        num_cpus: float | None = None,
        num_gpus: float = 0.0,
        max_parallel: int | None = None,
    ) -> None:
        self.address, self.num_cpus, self.num_gpus = address, num_cpus, num_gpus
        self.max_parallel = max_parallel
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: list[list[str]], initial_job_idx: int) -> list[JobReturn]:
        import ray

        from gclab.runtime.ray_start import start_or_join

        assert self.config is not None and self.hydra_context is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        log.info(f"Launching {len(job_overrides)} jobs as Ray tasks")
        jobs = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            jobs.append(Job(idx, list(overrides)))
        # A training job's reservation needs its config here; a simulator job's task
        # composes its own, in parallel, rather than holding every job back
        configs = [self._compose(job) for job in jobs] if _is_training(self.config) else None
        if not ray.is_initialized():  # jobs at the priority they would have run serially
            cpus = max(map(_local_cpus, configs)) if configs else os.cpu_count() or 1
            start_or_join(self.address, cpus, gpus=True, niceness=0)
        room = self._room(configs or [self.config], ray.cluster_resources())
        limit = min(self.max_parallel or room, room)
        log.info(f"At most {limit} jobs run at a time")
        return self._run(jobs, configs, limit)

    def _compose(self, job: Job) -> DictConfig:
        """A job's config, as the basic launcher composes it."""
        assert self.config is not None and self.hydra_context is not None
        return compose(self.hydra_context, self.config, job)

    def _run(
        self, jobs: list[Job], configs: list[DictConfig] | None, limit: int
    ) -> list[JobReturn]:
        """Run every job, at most ``limit`` at a time; their returns in job order."""
        import ray

        remote = ray.remote(max_retries=0)(_run_job)  # a dead process is not retried
        # What every job shares is serialized once, into the object store, not per job.
        shared = [ray.put(x) for x in (self.hydra_context, self.task_function, self.config)]
        state = ray.put(Singleton.get_state())
        returns: list[JobReturn | None] = [None] * len(jobs)
        pending: dict[Any, int] = {}  # ObjectRef -> job
        for i, job in enumerate(jobs):
            while len(pending) >= limit:
                self._collect(pending, returns, jobs, configs)
            config = self.config if configs is None else configs[i]
            given = job if configs is None else config  # its overrides, or its config
            task = remote.options(num_cpus=self._cpus(config), num_gpus=self.num_gpus)
            ref = task.remote(shared[0], shared[2], given, shared[1], state, os.getcwd())
            pending[ref] = i
        while pending:
            self._collect(pending, returns, jobs, configs)
        return [r for r in returns if r is not None]

    def _cpus(self, config: DictConfig) -> float:
        if self.num_cpus is not None:
            return self.num_cpus
        return 0.0 if _is_training(config) else 1.0

    def _room(self, configs: list[DictConfig], resources: dict[str, float]) -> int:
        """Jobs the cluster holds at once, each with the largest reservation of any job."""
        held = [self._reservation(config, resources) for config in configs]
        most = {unit: max(h[unit] for h in held) for unit in ("CPU", "GPU")}
        fits = [int(resources.get(unit, 0.0) // need) for unit, need in most.items() if need]
        return max(1, min(fits, default=len(configs)))

    def _reservation(self, config: DictConfig, resources: dict[str, float]) -> dict[str, float]:
        """What one job holds while it runs: its task's share and its worker actors'."""
        held = {"CPU": self._cpus(config), "GPU": self.num_gpus}
        cluster = _cluster(config)
        if cluster is not None:
            wall = OmegaConf.select(config, "network.clock") == "wall"
            actors = len(cluster.groups(one_per_worker=wall, resources=resources))
            held["CPU"] += actors * cluster.worker_cpus
            held["GPU"] += actors * cluster.worker_gpus
        return held

    def _collect(
        self, pending: dict[Any, int], returns: list, jobs: list[Job], configs: list | None
    ) -> None:
        """Wait for the next job to end; a job whose process died is recorded as failed."""
        import ray

        (ref,), _ = ray.wait(list(pending), num_returns=1)
        i = pending.pop(ref)
        try:
            returns[i] = ray.get(ref)
        except ray.exceptions.RayError as exc:
            returns[i] = _died(self._compose(jobs[i]) if configs is None else configs[i], exc)


def _run_job(
    hydra_context: HydraContext,
    primary: DictConfig,
    job: Job | DictConfig,
    task_function: TaskFunction,
    singleton_state: dict[Any, Any],
    cwd: str,
) -> JobReturn:
    """One job in a Ray task, as the basic launcher runs it, from the launcher's directory
    (``job``: its config, or its overrides to compose it from ``primary`` here)."""
    Path(cwd).mkdir(parents=True, exist_ok=True)  # another node: the same path there
    os.chdir(cwd)
    setup_globals()
    Singleton.set_state(singleton_state)
    config = job if isinstance(job, DictConfig) else compose(hydra_context, primary, job)
    HydraConfig.instance().set_config(config)
    return run_job(
        hydra_context=hydra_context,
        task_function=task_function,
        config=config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


def _is_training(config: DictConfig) -> bool:
    """A training job: its worker actors reserve its CPUs and GPUs."""
    return OmegaConf.select(config, "cluster._target_") == TRAINING_CLUSTER


def _cluster(config: DictConfig) -> Any:
    """A training job's :class:`gclab.runtime.cluster.Cluster`, else None.

    None for a simulator job, and for a bad cluster config: the job reports it itself.
    """
    from gclab.errors import ConfigError
    from gclab.schemas import instantiate_checked

    if not _is_training(config):
        return None
    try:
        return instantiate_checked(config.cluster)
    except ConfigError:
        return None


def _local_cpus(config: DictConfig) -> int:
    """CPUs a private local Ray needs for this job: as for the job run on its own."""
    cluster = _cluster(config)
    return (os.cpu_count() or 1) if cluster is None else cluster.local_cpus()


def _died(config: DictConfig, exc: Exception) -> JobReturn:
    """The failed return of a job whose task never returned, and its ``error.txt``."""
    out = Path(str(config.hydra.sweep.dir)) / str(config.hydra.sweep.subdir)
    out.mkdir(parents=True, exist_ok=True)
    message = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
    (out / "error.txt").write_text(message + "\n", encoding="utf-8")
    log.error("job %s died: %s", config.hydra.job.num, message)
    return JobReturn(
        overrides=list(config.hydra.overrides.task),
        cfg=config,
        working_dir=str(out),
        task_name=config.hydra.job.name,
        status=JobStatus.FAILED,
        _return_value=exc,
    )


# The launcher's config is derived from its signature; the address defaults to the
# training app's cluster.address where there is one.
ConfigStore.instance().store(
    group="hydra/launcher",
    name="ray",
    node=builds(
        RayLauncher, populate_full_signature=True, address="${oc.select:cluster.address,null}"
    ),
    provider="gclab",
)
