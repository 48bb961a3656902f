"""Network helpers for tests that start real Ray nodes."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def ray_head(num_cpus: int) -> Iterator[tuple[int, dict[str, str]]]:
    """A one-node Ray cluster of its own (port, temp dir, auth token), stopped on exit.

    Yields its port and the environment a client needs (token authentication on).
    """
    port = free_port()
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: unix socket paths max ~107 chars
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    head = subprocess.Popen(
        ["ray", "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
         f"--num-cpus={num_cpus}", "--include-dashboard=false", f"--temp-dir={temp}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **auth},
    )  # fmt: skip
    try:
        yield port, auth
    finally:
        head.terminate()
        head.wait(timeout=60)
        shutil.rmtree(temp, ignore_errors=True)
