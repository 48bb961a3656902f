"""Network boxes in tests: skip where namespaces cannot be made, move bytes through a box."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gclab.errors import ConfigError
from gclab.runtime import netbox
from gclab.runtime.netbox import Box, Link

#: Receives argv[2] bytes on argv[1]:5001 and prints how many arrived.
SINK = """
import socket, sys
s = socket.create_server((sys.argv[1], 5001))
print("ready", flush=True)
c, _ = s.accept()
got = 0
while got < int(sys.argv[2]):
    chunk = c.recv(1 << 20)
    if not chunk:
        break
    got += len(chunk)
print(got, flush=True)
"""

#: Sends argv[2] bytes to argv[1]:5001.
SOURCE = """
import socket, sys
c = socket.create_connection((sys.argv[1], 5001))
c.sendall(b"x" * int(sys.argv[2]))
c.close()
"""


@functools.cache
def _unavailable() -> str | None:
    """Why no box can be built here, or None."""
    try:
        with Box([Link(1e6, 0.0)]):
            return None
    except ConfigError as exc:
        return str(exc)
    except (RuntimeError, OSError) as exc:
        return f"network namespaces cannot be made here ({exc})"


def box_or_skip() -> None:
    """Skip the test, with the one sentence that says why, where no box can be built."""
    reason = _unavailable()
    if reason is not None:
        pytest.skip(reason)


def send_up(box: Box, node: int, size: int) -> int:
    """Send ``size`` bytes over TCP from node ``node`` to the head; the bytes that arrived."""
    sink = subprocess.Popen(
        ["ip", "netns", "exec", box.head, sys.executable, "-c", SINK, box.address(0), str(size)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert sink.stdout.readline().strip() == "ready"
    ns = box.nodes[node - 1]
    source = [sys.executable, "-c", SOURCE, box.address(0), str(size)]
    subprocess.run(["ip", "netns", "exec", ns, *source], check=True, timeout=120)
    out, _ = sink.communicate(timeout=120)
    return int(out.strip())


def namespaces_of(pid: int) -> list[str]:
    """The namespaces of the boxes process ``pid`` built (and has not removed)."""
    return [ns for ns in netbox.boxes() if ns.startswith(f"{netbox.PREFIX}-{pid}-")]


def wait_for_box(proc: subprocess.Popen, count: int, timeout: float = 300) -> set[int]:
    """Once ``proc``'s box has ``count`` namespaces: their inodes (ids that outlive names)."""
    deadline = time.monotonic() + timeout
    while len(names := namespaces_of(proc.pid)) < count:
        assert proc.poll() is None, "the run ended before its box was built"
        assert time.monotonic() < deadline, f"no box of {count} namespaces in {timeout} s"
        time.sleep(0.05)
    return {os.stat(f"/run/netns/{ns}").st_ino for ns in names}


def processes_in(inodes: set[int]) -> list[int]:
    """Pids of the processes still in one of the namespaces ``inodes``, named or not."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                link = os.readlink(entry / "ns" / "net")
            except OSError:  # gone, or a kernel thread
                continue
            if int(link.removeprefix("net:[").removesuffix("]")) in inodes:
                found.append(int(entry.name))
    return found
