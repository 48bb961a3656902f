"""Connecting to Ray: a private local instance, or an existing cluster by address."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import ray

from gclab.coding import params
from gclab.errors import ConfigError
from gclab.runtime import devices, timing
from gclab.runtime.devices import DeviceSetting
from gclab.runtime.placement import Strategy
from gclab.runtime.ray_start import host_port, start_or_join
from gclab.runtime.timing import ComputeTimeSetting


class Cluster:
    """How many logical workers, how they are packed into actors, and where Ray runs.

    ``actors=None`` packs the logical workers into as many actors as the Ray cluster
    has cores for (GPU workers: GPUs; :meth:`default_actors`), so that actors never
    outnumber the cores they run on; with ``network.clock=wall`` it is one actor per
    logical worker, since there a worker's packet arrives when its actor's call returns,
    and workers sharing an actor would share one arrival. ``compute_time`` says how each
    logical worker's compute is measured for the virtual clock
    (:mod:`gclab.runtime.timing`): ``auto`` is the thread's CPU time for one-thread CPU
    workers, CUDA events on a GPU and wall time otherwise. ``device``, ``server_device``
    and ``bf16`` (autocast of the workers' forward pass): :mod:`gclab.runtime.devices`.
    ``server_threads``: torch and BLAS threads of the driver (decode, optimizer step); 1 by
    default, since a second thread mostly spins against the workers on a busy machine
    (bench/overhead.py; BENCHMARKS.md, "Where the time goes"). The test-set evaluation,
    which the workers wait for, uses every core the driver may run on. ``timeout``:
    seconds a round may take from its start: actors still busy then are taken as stuck,
    restarted, and their packets erased; also how long the actors may take to come up
    (at least a minute when they fit: :mod:`gclab.runtime.pool`). ``placement``:
    ``pack`` or ``spread`` the actors over Ray's nodes (:mod:`gclab.runtime.placement`).
    ``address=None`` starts a private local Ray bound to loopback, without the
    dashboard unless ``dashboard=true`` (Ray's token authentication stays on);
    otherwise ``ray.init(address)`` joins an existing cluster (``auto``: the one
    ``ray start`` left on this machine).
    """

    def __init__(
        self,
        workers: int = 4,
        actors: int | None = None,
        worker_cpus: float = 0.5,
        worker_gpus: float = 0.0,
        threads_per_actor: int = 1,
        compute_time: ComputeTimeSetting = ComputeTimeSetting.auto,
        device: DeviceSetting = DeviceSetting.auto,
        server_device: DeviceSetting = DeviceSetting.auto,
        bf16: bool = False,
        placement: Strategy = Strategy.pack,
        server_threads: int = 1,
        timeout: float = 120.0,
        dashboard: bool = False,
        address: str | None = None,
    ) -> None:
        params.count("workers", workers)
        if actors is not None and not 1 <= actors <= workers:
            raise ConfigError(
                f"actors={actors} is invalid: it must be between 1 and "
                f"workers={workers} (or null: as many as the cores allow).",
                param="actors",
            )
        if not (0 <= worker_cpus < math.inf and 0 <= worker_gpus < math.inf):
            raise ConfigError(
                f"worker_cpus={worker_cpus} / worker_gpus={worker_gpus} are invalid: "
                "both must be finite and >= 0 (fractions are fine).",
                param="worker_cpus",
            )
        if threads_per_actor < 1:
            raise ConfigError(
                f"threads_per_actor={threads_per_actor} must be >= 1.", param="threads_per_actor"
            )
        #: ``cpu`` or ``cuda`` (:mod:`gclab.runtime.devices`), for workers and server.
        self.device = devices.worker_device(device, worker_gpus, check_visible=address is None)
        self._device_setting = device
        self.server_device = devices.server_device(server_device, self.device)
        self.compute_time = timing.resolve(compute_time, self.device, threads_per_actor)
        self.bf16 = bf16
        self.placement = Strategy(placement)
        if server_threads < 1:
            raise ConfigError(
                f"server_threads={server_threads} must be >= 1.", param="server_threads"
            )
        if not timeout > 0:
            raise ConfigError(
                f"timeout={timeout} is invalid: it must be > 0 seconds (how long a "
                "round may take before the actors still busy are restarted).",
                param="timeout",
            )
        if address is not None:
            try:
                host_port(address)
            except ValueError as exc:
                raise ConfigError(
                    f"address={address!r} is invalid ({exc}): use null (a private "
                    "local Ray), auto, ray://host:port or host:port.",
                    param="address",
                ) from None
        self.workers, self.actors = workers, actors
        self.worker_cpus, self.worker_gpus = worker_cpus, worker_gpus
        self.threads_per_actor, self.timeout, self.address = threads_per_actor, timeout, address
        self.dashboard = dashboard
        self.server_threads = server_threads

    def groups(
        self, one_per_worker: bool = False, resources: Mapping[str, float] | None = None
    ) -> list[list[int]]:
        """Logical workers of each actor: contiguous, as even as possible.

        The default packing is :meth:`default_actors` of the ``CPU`` and ``GPU`` of
        ``resources``, by default the Ray cluster's (call it once Ray runs:
        :meth:`connect`). ``one_per_worker`` (the wall clock) makes the default one actor
        per worker.
        """
        actors = self.actors
        if actors is None and one_per_worker:
            actors = self.workers
        elif actors is None:
            resources = ray.cluster_resources() if resources is None else resources
            actors = self.default_actors(resources.get("CPU", 1.0), resources.get("GPU", 0.0))
        size, extra = divmod(self.workers, actors)
        bounds = [a * size + min(a, extra) for a in range(actors + 1)]
        return [list(range(bounds[a], bounds[a + 1])) for a in range(actors)]

    def default_actors(self, cpus: float, gpus: float = 0.0) -> int:
        """Actors for ``cpus`` cores and ``gpus`` GPUs, at most one per logical worker.

        On GPUs one actor per GPU (its logical workers take turns on it, so CUDA events
        time each one alone); on CPUs one per ``threads_per_actor`` cores (or per
        ``worker_cpus``, if an actor reserves more), so the reservation always fits.
        """
        if self.device == "cuda":
            slots = gpus // max(1.0, self.worker_gpus)
        else:
            slots = cpus // max(self.threads_per_actor, self.worker_cpus)
        return max(1, min(self.workers, int(slots)))

    def connect(self) -> None:
        """Start or join Ray (reusing a session this process already has).

        Then GPU workers are refused if the cluster has no GPU: their actors would wait
        for one forever.
        """
        if not ray.is_initialized():
            self._start_or_join()
        devices.worker_device(self._device_setting, self.worker_gpus, check_visible=True)

    def local_cpus(self) -> int:
        """CPUs for a private local Ray: the cores, or more if the actors reserve more.

        Ray's CPUs are a count of reservations, not of cores: an actor that cannot
        reserve its share would wait forever, whereas an oversubscribed core only slows
        the wall clock (the compute time is each worker's own CPU time).
        """
        cores = os.cpu_count() or 1
        return max(
            cores, math.ceil((self.actors or self.default_actors(cores)) * self.worker_cpus) + 1
        )

    def _start_or_join(self) -> None:
        start_or_join(self.address, self.local_cpus(), self.worker_gpus > 0, self.dashboard)

    def check(self, network: Any) -> None:
        """Raise :class:`ConfigError` if the ``network`` config does not suit this cluster
        (any does here; ``cluster=netns`` needs the wall clock)."""

    def running(self) -> AbstractContextManager[Any]:
        """Where Ray lives while the run trains. Nothing to set up here: :meth:`connect`
        starts or joins it, and a private Ray ends with the process. ``cluster=netns``
        builds its box here (:mod:`gclab.runtime.netns`)."""
        return nullcontext()

    def pins(self, actors: int) -> list[dict[str, float]]:
        """Resources pinning each of ``actors`` actors to a node
        (:class:`gclab.runtime.placement.Placement`): none here, Ray's strategy decides."""
        return []

    def layout(self, nodes: Sequence[str], groups: Sequence[Sequence[int]]) -> dict[str, Any]:
        """What summary.json records, beyond ``nodes``, about where the actors (the Ray
        node of each, ``nodes``, hosting the logical workers ``groups``) run: nothing here."""
        return {}

    def traffic(self) -> dict[str, Any]:
        """What summary.json records about the network's traffic during the rounds,
        asked after the last one: nothing here."""
        return {}
