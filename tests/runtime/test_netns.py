"""``cluster=netns`` end to end: training over a 2-node box with lossy links, and Ctrl-C.

``python -m gclab`` builds the box, trains over its links and removes it: the workers
are on both nodes, every round lasts at least the bytes it had to move through one
node's link, the links lost packets, and afterwards no namespace, Ray process or
temporary directory of the run is left, also after a Ctrl-C. Skipped with one sentence
where namespaces cannot be made.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from gclab.tracking.artifacts import read_metrics
from helpers.config import TINY
from helpers.interrupts import start, wait_for_rounds
from helpers.netns import box_or_skip, namespaces_of, processes_in, wait_for_box

pytestmark = pytest.mark.slow

#: A thin CNN (292 KB gradients) on 4 workers over two nodes of 2.5 MB/s links.
RATE = 2.5e6
BOX = [
    *[o for o in TINY if not o.startswith("train.rounds")],
    "cluster=netns", "cluster.nodes=2", "cluster.workers=4", "scheme=classic_fr",
    f"cluster.link.bandwidth={RATE}", "network.clock=wall",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _box() -> None:
    box_or_skip()


def temp_dirs() -> set[Path]:
    return set(Path("/tmp").glob("gclab-box-*"))


def assert_nothing_left(pid: int, inodes: set[int], temps: set[Path]) -> None:
    """No namespace of ``pid``'s box, no process in one (named or not), no new
    temporary directory."""
    assert not namespaces_of(pid)
    assert not processes_in(inodes)
    assert temp_dirs() <= temps


def test_trains_over_lossy_shaped_links_on_both_nodes_and_leaves_nothing(tmp_path) -> None:
    temps = temp_dirs()
    out = tmp_path / "run"
    args = [*BOX, "cluster.link.loss=0.02", "train.rounds=4", f"hydra.run.dir={out}"]
    proc = start(args)
    inodes = wait_for_box(proc, 3)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["nodes"] == 2 and summary["worker_nodes"] == [1, 2, 1, 2]  # w mod 2
    payload = summary["payload_bytes"]  # classic_fr: a packet is a whole gradient
    rounds = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "round"]
    assert len(rounds) == 4
    for record in rounds:  # the weights came down a link, then a packet went up one
        assert record["round_time"] >= 2 * payload / RATE
        t = record["timeline"]  # each actor's phases in order, between the driver's
        phases = zip(t["called"], t["fetched"], t["computing"], t["computed"], t["returned"])
        for w, stamps in enumerate(phases):
            assert stamps[0] >= 0 and list(stamps) == sorted(stamps)
            assert stamps[1] >= 0.9 * payload / RATE  # the weights came down after `sent`
            assert stamps[-1] <= t["back"][w] <= t["closed"] <= t["served"]
    traffic = summary["link_traffic"]
    for node in traffic:  # two packets up and one copy of the weights down, per round
        assert node["up_bytes"] >= 4 * 2 * payload and node["down_bytes"] >= 4 * payload
    assert sum(n["up_lost"] + n["down_lost"] for n in traffic) > 0  # ~20 of ~1000 packets
    assert summary["links"] == [{"bandwidth": RATE, "loss": 0.02}] * 2
    assert_nothing_left(proc.pid, inodes, temps)


def test_ctrl_c_removes_the_box(tmp_path) -> None:
    temps = temp_dirs()
    out = tmp_path / "run"
    proc = start([*BOX, "cluster.nodes=1", "train.rounds=500", f"hydra.run.dir={out}"])
    inodes = wait_for_box(proc, 2)
    wait_for_rounds(out, proc, 1)
    assert processes_in(inodes)  # the Ray head, the node, the driver, the workers
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it: to the whole group
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert_nothing_left(proc.pid, inodes, temps)
