"""Starting a private local Ray, or joining a running cluster, without importing torch:
the Ray launcher of a simulator sweep starts Ray from here (a training run's
:class:`~gclab.runtime.cluster.Cluster` does too)."""

from __future__ import annotations

import atexit
import os
import socket

import ray

from gclab.errors import ConfigError
from gclab.rundir import interrupts


def start_or_join(
    address: str | None,
    num_cpus: int | None = None,
    gpus: bool = False,
    dashboard: bool = False,
    niceness: int | None = None,
    node_ip: str | None = None,
) -> None:
    """Start a private local Ray (``address=None``) or join the cluster at ``address``.

    The private Ray binds to loopback, has ``num_cpus`` CPUs (default: the cores), GPUs
    only if ``gpus``, the dashboard only if ``dashboard``, and starts its worker
    processes at ``niceness`` (default: Ray's 15, background priority). Joining fails
    in one sentence (:class:`ConfigError`) when nobody answers at ``address``; ``node_ip``
    is the driver's address there (default: Ray finds it by its route to the internet,
    which a network namespace may lack). Then SIGINT and SIGTERM are the run's again
    (:func:`gclab.rundir.interrupts.reclaim`).
    """
    _start_or_join(address, num_cpus, gpus, dashboard, niceness, node_ip)
    interrupts.reclaim()


def _start_or_join(
    address: str | None,
    num_cpus: int | None,
    gpus: bool,
    dashboard: bool,
    niceness: int | None,
    node_ip: str | None,
) -> None:
    if address is None:
        atexit.unregister(stop_monitor)  # once, however often Ray is started
        atexit.register(stop_monitor)  # runs before Ray's own shutdown (registered earlier)
        ray.init(
            address="local",  # never a cluster `ray start` left running (RAY_ADDRESS)
            num_cpus=num_cpus or os.cpu_count() or 1,
            num_gpus=None if gpus else 0,
            include_dashboard=dashboard,  # off unless asked: it serves HTTP
            _node_ip_address="127.0.0.1",
            _system_config=None if niceness is None else {"worker_niceness": niceness},
            log_to_driver=True,
            configure_logging=False,
        )
        return
    try:
        probe(address)  # ray.init itself retries for minutes on a dead address
        ray.init(
            address=address, _node_ip_address=node_ip, log_to_driver=True, configure_logging=False
        )
    except (ConnectionError, RuntimeError, ValueError, OSError) as exc:
        raise ConfigError(
            f"cluster.address={address!r}: no Ray cluster answered ({exc}); start "
            "one with 'ray start --head' or use cluster=local."
        ) from exc


def stop_monitor() -> None:
    """Kill the autoscaler monitor of the private Ray this process started, if any.

    At exit, before Ray's own shutdown: that shutdown stops the GCS first, then sends the
    monitor SIGTERM, on which the monitor tries to report its end to the stopped GCS, and
    Ray waits a full second before it kills it. Killed first, it costs nothing, and every
    run on a private Ray exits a second sooner. A joined cluster's monitor is not this
    process's, and is left alone.
    """
    from ray._private import ray_constants, worker

    node = getattr(worker, "_global_node", None)
    processes = getattr(node, "all_processes", None) or {}
    for info in processes.pop(ray_constants.PROCESS_TYPE_MONITOR, []):
        info.process.kill()
        info.process.wait()


def host_port(address: str) -> tuple[str, int] | None:
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


def probe(address: str, timeout: float = 5.0) -> None:
    """Fail fast unless something accepts TCP connections at ``host:port``."""
    target = host_port(address)
    if target is not None:
        with socket.create_connection(target, timeout=timeout):
            pass
