"""Chaos: a ``hydra/launcher=ray`` sweep of training jobs on a real Ray head has its worker
actors killed at random while it runs. Every job ends with the weights of its
uninterrupted run (a dead actor's packets are erasures, recomputed when a due job needs
them), or records its one-line reason in error.txt.

The jobs are uncoded and classic_fr: losing a packet changes which worker's copy of a
partial sum is added, not its bits, so a job that lost no step has the uninterrupted run's
weights to float32 rounding of the optimizer, far below one step. (A CR decode of another
survivor set sums other packets, and over 40 rounds on random labels such rounding can
grow to the size of a step: tests/runtime/test_exactness.py checks CR under erasures.)"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gclab.tracking.artifacts import load_checkpoint
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process
from helpers.interrupts import ROOT, env
from helpers.raycluster import ray_cluster
from helpers.training import assert_same_weights, trained_weights

#: Four jobs of two actors (two logical workers each) on 4 workers.
SWEEP = [
    *[o for o in TINY if not o.startswith(("train.rounds", "model.width"))],
    "model.width=32", "train.rounds=80", "scheme=uncoded,classic_fr",
    "seed=0,1", "cluster=ray", "cluster.workers=4", "cluster.actors=2",
    "cluster.worker_cpus=0.5", "cluster.timeout=300",  # start-up on a loaded machine
]  # fmt: skip


#: The most actors the chaos kills.
KILLS = 8

#: How far the weights may be from the uninterrupted run's: float32 rounding. One job's
#: step left out moves these jobs' weights by at least 1.6e-2 (seed 0) and 7.3e-2 (seed 1).
TOLERANCE = 1e-5


def actor_pids(address: str) -> list[int]:
    """The worker actors' processes of the head at ``address`` (children of its raylet)."""
    table = subprocess.run(
        ["ps", "-eww", "-o", "pid,ppid,args"], capture_output=True, text=True
    ).stdout.splitlines()
    rows = [line.split(None, 2) for line in table[1:]]
    port = address.rpartition(":")[2]
    head = next(args for _, _, args in rows if "ray start" in args and f"--port={port}" in args)
    temp = head.split("--temp-dir=")[1].split()[0]
    raylets = {pid for pid, _, args in rows if "/raylet" in args and temp in args}
    return [int(pid) for pid, ppid, args in rows if ppid in raylets and "RayWorkerHost" in args]


class Killer(threading.Thread):
    """SIGKILLs a random worker actor every 1.5–3 s once the sweep's rounds have begun,
    at most :data:`KILLS` times (a restart takes seconds on a loaded machine); counts
    the kills."""

    def __init__(self, address: str, sweep: Path) -> None:
        super().__init__(daemon=True)
        self.address, self.sweep, self.kills = address, sweep, 0
        self.done = threading.Event()
        self.rng = random.Random(0)

    def run(self) -> None:
        while self.kills < KILLS and not self.done.wait(self.rng.uniform(1.5, 3.0)):
            pids = actor_pids(self.address)
            begun = any(p.stat().st_size for p in self.sweep.glob("*/metrics.jsonl"))
            if pids and begun:
                try:
                    os.kill(self.rng.choice(pids), signal.SIGKILL)
                    self.kills += 1
                except ProcessLookupError:
                    continue


@pytest.mark.slow
def test_a_sweep_whose_worker_actors_are_killed_at_random_keeps_its_weights(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", env()["PYTHONPATH"])  # the nodes import this checkout
    sweep = tmp_path / "sweep"
    with ray_cluster(4) as (address, auth):
        killer = Killer(address, sweep)
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "gclab", "-m", *SWEEP, f"cluster.address={address}",
             "hydra/launcher=ray", f"hydra.sweep.dir={sweep}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env(**auth),
            cwd=ROOT,
        )  # fmt: skip
        killer.start()
        stderr = proc.communicate(timeout=1500)[1]
        killer.done.set()
        killer.join()
    assert proc.returncode == 0, stderr[-3000:]
    outcomes = {}
    for job in sorted(sweep.glob("[0-9]*")):
        overrides = [
            o for o in OmegaConf.load(job / ".hydra" / "overrides.yaml")
            if not o.startswith("cluster.address")
        ]  # fmt: skip
        if (job / "error.txt").exists():
            lines = (job / "error.txt").read_text().splitlines()
            assert len(lines) == 1, lines
            outcomes[job.name] = f"error.txt: {lines[0]}"
            continue
        got = load_checkpoint(job / "checkpoint.pt")["model"]
        want = trained_weights(compose_config(overrides), tmp_path / job.name, in_process)
        assert_same_weights(got, want, tol=TOLERANCE)
        diff = max(float((got[k] - want[k]).abs().max()) for k in want)
        outcomes[job.name] = f"weights of the uninterrupted run (max difference {diff:.1e})"
    print(f"chaos: {killer.kills} actors killed in {time.monotonic() - started:.0f} s; {outcomes}")
    assert len(outcomes) == 4 and killer.kills >= 3
