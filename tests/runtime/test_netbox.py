"""The network box without Ray: shaped and lossy links, their counters, and removal.

Real namespaces, so these run as root with iproute2 and nftables (``.ci/run`` installs
them) and are skipped with one sentence elsewhere.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from gclab.runtime.netbox import Box, Link
from helpers.interrupts import ROOT, env
from helpers.netns import box_or_skip, namespaces_of, send_up

pytestmark = pytest.mark.slow

#: Builds a box, says so, and waits to be killed.
HOLD = """
import time
from gclab.runtime.netbox import Box, Link
with Box([Link(1e6, 0.0)]):
    print("built", flush=True)
    time.sleep(600)
"""


@pytest.fixture(autouse=True)
def _box() -> None:
    box_or_skip()


def test_links_are_shaped_lose_their_share_and_count_it() -> None:
    """2 MB through a 2.5 MB/s link take at least 0.8 s; a 5 % link loses about 5 % of its
    IP packets (each of at most MTU bytes), the other none; nothing is left afterwards."""
    size, rate = 2_000_000, 2.5e6
    with Box([Link(rate, 0.0), Link(rate, 0.05)], mtu=9000) as box:
        start = time.monotonic()
        assert send_up(box, 1, size) == size
        assert time.monotonic() - start >= 0.97 * size / rate  # the bucket's two-frame burst
        assert send_up(box, 2, size) == size
        clean, lossy = box.traffic()
    assert clean["up_lost"] == clean["down_lost"] == 0
    assert clean["up_bytes"] >= size and clean["up_bytes"] / clean["up"] <= 9014  # one per skb
    sent = lossy["up"] + lossy["up_lost"]  # about 223 data packets, and retransmissions
    assert 220 <= sent <= 400
    assert 1 <= lossy["up_lost"] <= 0.15 * sent  # Binomial(~230, 0.05): P(outside) < 1e-4
    assert not namespaces_of(os.getpid())


def test_a_failure_inside_removes_the_box() -> None:
    with pytest.raises(ZeroDivisionError), Box([Link(1e6, 0.0), Link(1e6, 0.1)]):
        assert len(namespaces_of(os.getpid())) == 3
        _ = 1 / 0
    assert not namespaces_of(os.getpid())


def test_the_box_of_a_killed_process_goes_with_the_next_box() -> None:
    """SIGKILL leaves no chance to remove a box: the next one built removes it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD], cwd=ROOT, env=env(), stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "built"
        assert len(namespaces_of(proc.pid)) == 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(namespaces_of(proc.pid)) == 2
    with Box([Link(1e6, 0.0)]):
        assert not namespaces_of(proc.pid)
