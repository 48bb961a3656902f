"""Connecting to Ray: a private local instance, or an existing cluster by address."""

from __future__ import annotations

import math
import os
import socket

import ray

from gclab.errors import ConfigError
from gclab.runtime.timing import ComputeTime


class Cluster:
    """How many logical workers, how they are packed into actors, and where Ray runs.

    ``actors=None`` packs the logical workers into as many actors as the Ray cluster has
    cores for (``CPUs // threads_per_actor``), so that actors never outnumber the cores they
    run on; with ``network.clock=wall`` it is one actor per logical worker, since there a
    worker's packet arrives when its actor's call returns, and workers sharing an actor
    would share one arrival. ``compute_time`` says how each logical worker's compute is
    measured for the virtual clock (:mod:`gclab.runtime.timing`): ``auto`` is the thread's
    CPU time for one-thread workers and wall time otherwise. ``server_threads``: torch
    threads of the driver (decode, optimizer step, evaluation); 1 by default, since a second
    thread mostly spins against the workers on a busy machine (bench/overhead.py;
    BENCHMARKS.md, "Where the time goes"). ``timeout``: seconds a round may take from its
    start: actors still busy then are taken as stuck, restarted, and their packets erased;
    also how long the actors may take to come up (at least a minute when they fit:
    :mod:`gclab.runtime.pool`). ``address=None`` starts a private local Ray bound to
    loopback, without the dashboard unless ``dashboard=true`` (Ray's token authentication
    stays on); otherwise ``ray.init(address)`` joins an existing cluster (``auto``: the one
    ``ray start`` left on this machine).
    """

    def __init__(
        self,
        workers: int = 4,
        actors: int | None = None,
        worker_cpus: float = 0.5,
        worker_gpus: float = 0.0,
        threads_per_actor: int = 1,
        compute_time: str = "auto",
        server_threads: int = 1,
        timeout: float = 120.0,
        dashboard: bool = False,
        address: str | None = None,
    ) -> None:
        if not isinstance(workers, int) or workers < 1:
            raise ConfigError(
                f"cluster.workers={workers!r} is invalid: it must be an integer >= 1."
            )
        if actors is not None and not 1 <= actors <= workers:
            raise ConfigError(
                f"cluster.actors={actors} is invalid: it must be between 1 and "
                f"cluster.workers={workers} (or null: as many as the cores allow)."
            )
        if not (0 <= worker_cpus < math.inf and 0 <= worker_gpus < math.inf):
            raise ConfigError(
                f"cluster.worker_cpus={worker_cpus} / worker_gpus={worker_gpus} are invalid: "
                "both must be finite and >= 0 (fractions are fine)."
            )
        if threads_per_actor < 1:
            raise ConfigError(f"cluster.threads_per_actor={threads_per_actor} must be >= 1.")
        self.compute_time = _compute_time(compute_time, threads_per_actor)
        if server_threads < 1:
            raise ConfigError(f"cluster.server_threads={server_threads} must be >= 1.")
        if not timeout > 0:
            raise ConfigError(
                f"cluster.timeout={timeout} is invalid: it must be > 0 seconds (how long a "
                "round may take before the actors still busy are restarted)."
            )
        if address is not None:
            try:
                _host_port(address)
            except ValueError as exc:
                raise ConfigError(
                    f"cluster.address={address!r} is invalid ({exc}): use null (a private "
                    "local Ray), auto, ray://host:port or host:port."
                ) from None
        self.workers, self.actors = workers, actors
        self.worker_cpus, self.worker_gpus = worker_cpus, worker_gpus
        self.threads_per_actor, self.timeout, self.address = threads_per_actor, timeout, address
        self.dashboard = dashboard
        self.server_threads = server_threads

    def groups(self, one_per_worker: bool = False, cpus: float | None = None) -> list[list[int]]:
        """Logical workers of each actor: contiguous, as even as possible.

        The default packing is one actor per ``threads_per_actor`` of ``cpus`` (by default
        the CPUs of the Ray cluster: call it once Ray runs, :meth:`connect`).
        ``one_per_worker`` (the wall clock) makes the default one actor per worker.
        """
        actors = self.actors
        if actors is None and one_per_worker:
            actors = self.workers
        elif actors is None:
            actors = self.default_actors(_ray_cpus() if cpus is None else cpus)
        size, extra = divmod(self.workers, actors)
        bounds = [a * size + min(a, extra) for a in range(actors + 1)]
        return [list(range(bounds[a], bounds[a + 1])) for a in range(actors)]

    def default_actors(self, cpus: float) -> int:
        """Actors for ``cpus`` cores: one per ``threads_per_actor`` of them, <= one per worker."""
        return max(1, min(self.workers, int(cpus) // self.threads_per_actor))

    def connect(self) -> None:
        """Start or join Ray (reusing a session this process already has)."""
        if ray.is_initialized():
            return
        if self.address is None:
            cores = os.cpu_count() or 1
            needed = math.ceil((self.actors or self.default_actors(cores)) * self.worker_cpus) + 1
            ray.init(
                address="local",  # never a cluster `ray start` left running (RAY_ADDRESS)
                num_cpus=max(cores, needed),
                num_gpus=None if self.worker_gpus else 0,
                include_dashboard=self.dashboard,  # off unless asked: it serves HTTP
                _node_ip_address="127.0.0.1",
                log_to_driver=True,
                configure_logging=False,
            )
            return
        try:
            _probe(self.address)  # ray.init itself retries for minutes on a dead address
            ray.init(address=self.address, log_to_driver=True, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError, OSError) as exc:
            raise ConfigError(
                f"cluster.address={self.address!r}: no Ray cluster answered ({exc}); start "
                "one with 'ray start --head' or use cluster=local."
            ) from exc


def _compute_time(value: str, threads: int) -> ComputeTime:
    """``cluster.compute_time``, with ``auto`` resolved (see :mod:`gclab.runtime.timing`)."""
    valid = ("auto", *(m.value for m in ComputeTime if m is not ComputeTime.cuda))
    if value not in valid:
        raise ConfigError(
            f"cluster.compute_time={value!r} is invalid: it must be one of {', '.join(valid)}."
        )
    if value == "auto":
        return ComputeTime.cpu if threads == 1 else ComputeTime.wall
    if value == "cpu" and threads > 1:
        raise ConfigError(
            f"cluster.compute_time=cpu measures one thread's CPU time, but "
            f"cluster.threads_per_actor={threads}; use compute_time=wall (or auto) with "
            "several threads, or threads_per_actor=1."
        )
    return ComputeTime(value)


def _ray_cpus() -> float:
    """CPUs of the Ray cluster this process is connected to."""
    return ray.cluster_resources().get("CPU", 1.0)


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``host:port`` address, None for ``auto`` and ``ray://``.

    Checked when the config is built, so a malformed address fails before Ray starts
    rather than inside ``ray.init`` (or as an OverflowError from the socket layer).
    """
    if address == "auto" or address.startswith("ray://"):
        return None  # `auto` reads Ray's local session file and fails fast by itself
    host, _, port = address.strip().rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError("expected host:port with a port in 1..65535")
    return host, int(port)


def _probe(address: str, timeout: float = 5.0) -> None:
    """Fail fast unless something accepts TCP connections at ``host:port``."""
    target = _host_port(address)
    if target is not None:
        with socket.create_connection(target, timeout=timeout):
            pass
