"""A real multi-node Ray cluster on this machine: ``ray start`` head plus worker nodes.

Two raylets on one host are two Ray nodes with distinct node ids (Ray's own tests
simulate clusters this way). Every node runs with token authentication and the
caller's environment (so Ray workers import this checkout), and the head has its own
short ``--temp-dir`` (unix socket paths are limited to ~107 characters). Only the
processes started here are stopped afterwards, never other people's Ray.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from helpers.net import free_port

COUNT_NODES = """
import ray, sys
ray.init(address=sys.argv[1], log_to_driver=False)
print(sum(n["Alive"] for n in ray.nodes()))
"""


@contextmanager
def ray_cluster(*node_cpus: int, timeout: float = 180) -> Iterator[tuple[str, dict[str, str]]]:
    """Start a head with ``node_cpus[0]`` CPUs and one node per further entry.

    Yields the head's address and the environment (auth token) a driver needs; returns
    once every node is alive.
    """
    port = free_port()
    address = f"127.0.0.1:{port}"
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    env = {**os.environ, **auth}
    head = ["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}"]
    started = [_start_node([*head, f"--num-cpus={node_cpus[0]}"], env)]
    try:
        for cpus in node_cpus[1:]:
            _wait_for_nodes(address, env, len(started), timeout)  # joins need a live head
            started.append(_start_node([f"--address={address}", f"--num-cpus={cpus}"], env))
        _wait_for_nodes(address, env, len(started), timeout)
        yield address, auth
    finally:
        for proc in reversed(started):
            _stop_node(proc)
        shutil.rmtree(temp, ignore_errors=True)


def _start_node(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        ["ray", "start", "--block", "--node-ip-address=127.0.0.1", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        start_new_session=True,  # its own process group: the node and what it spawns
    )  # fmt: skip


def _stop_node(proc: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM the node's process group (``ray start --block`` then stops its raylet and
    stores), and SIGKILL what is left of the group after ``grace`` seconds: a node whose
    GCS is gone, or one on a loaded machine, can take longer than that to stop itself."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _wait_for_nodes(address: str, env: dict[str, str], nodes: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        proc = subprocess.run(
            [sys.executable, "-c", COUNT_NODES, address],
            capture_output=True, text=True, env=env, timeout=timeout,
        )  # fmt: skip
        alive = proc.stdout.strip().splitlines()[-1:] if proc.returncode == 0 else []
        if alive and int(alive[0]) >= nodes:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{nodes} Ray nodes at {address} not alive: {proc.stderr[-500:]}")
        time.sleep(2)
