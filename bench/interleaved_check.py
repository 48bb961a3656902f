"""The issue-45 check: 256 workers, 12 rounds, 3 interleaved models, the Tokyo trace,
SR-SGC (2, 3, 23) and uncoded: each run's time, and whether both end with the same weights.

    python bench/interleaved_check.py                  # the shared CIFAR-10, batch 4096
    python bench/interleaved_check.py --quick          # 64 workers, synthetic data, batch 1024

Each arm runs ``python -m gclab`` as a user would (its own process, its own local Ray),
timed from the outside: wall seconds, and the CPU seconds of its whole process tree
(driver, Ray's daemons, the worker actors; sampled every 0.5 s from /proc, each process's
last reading kept, so processes that end between samples lose at most half a second).
Other jobs on the machine stretch the wall time but hardly the CPU time, which is why
``cluster.timeout`` is 600 s here (``--timeout``) and an arm whose local Ray missed its
start-up (Ray gives its raylet 30 s) is run again (``--tries``, the attempts shown).
Then every model's weights are compared between the two arms' checkpoints: the relative
difference ‖a − b‖ / ‖b‖ over all its parameters, and the largest max |a − b| / max |b|
of any one tensor. Interleaved models are exact SGD on their own jobs in every arm, so
both must be small (the check asks for <= 1e-4).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
from common import SHARED, _process_table, descendants, machine, shared_cifar

from gclab.tracking.artifacts import load_checkpoint

ARMS = {
    "sr_sgc": ["scheme=sr_sgc", "scheme.B=2", "scheme.W=3", "scheme.lam=23"],
    "uncoded": ["scheme=uncoded"],
}
TRACE = SHARED / "traces" / "lambda-tokyo-cnn-w256-r10-load000.npz"


class TreeCPU:
    """CPU seconds of a process and its descendants, sampled in a thread."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        self.pid, self.interval = pid, interval
        self.seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            table = _process_table()
            for p in descendants(self.pid, table):
                if p in table:  # the process itself may have ended since the listing
                    self.seen[p] = max(self.seen.get(p, 0.0), table[p][1])

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return sum(self.seen.values())


#: What Ray says when its raylet missed the 30 s it is given to register (ray/_private/node.py,
#: not configurable): seen at load 30 on this 2-core machine, before any training.
RAY_START_FAILED = "The current node timed out during startup"


def run_arm(name: str, overrides: list[str], run_dir: Path, tries: int) -> tuple[float, float, int]:
    """Run one arm; its wall and tree CPU seconds, and the attempts it took. An attempt
    whose local Ray failed to start is run again (up to ``tries`` in all); any other
    failure ends the check."""
    command = [sys.executable, "-m", "gclab", *ARMS[name], *overrides, f"hydra.run.dir={run_dir}"]
    log = run_dir.with_suffix(".log")
    attempt = 0
    while True:
        attempt += 1
        start = time.perf_counter()
        with open(log, "w") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
            cpu = TreeCPU(process.pid)
            code = process.wait()
        wall, seconds = time.perf_counter() - start, cpu.stop()
        if not code:
            return wall, seconds, attempt
        if RAY_START_FAILED not in log.read_text() or attempt >= tries:
            raise SystemExit(f"{name} failed with exit code {code}; its output: {log}")
        shutil.rmtree(run_dir, ignore_errors=True)


def differences(a: dict, b: dict) -> tuple[float, float]:
    """‖a − b‖ / ‖b‖ over every parameter, and the worst tensor's max |a − b| / max |b|."""
    va = torch.cat([t.flatten().double() for t in a.values()])
    vb = torch.cat([t.flatten().double() for t in b.values()])
    worst = max(float((a[k] - b[k]).abs().max()) / max(float(b[k].abs().max()), 1e-30) for k in b)
    return float((va - vb).norm() / vb.norm()), worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 workers, synthetic, batch 1024")
    parser.add_argument("--out", type=Path, default=None, help="run directories (default: temp)")
    parser.add_argument(
        "--arms", nargs="+", choices=list(ARMS), default=list(ARMS),
        help="the arms to run now; the weights are compared once --out holds both",
    )  # fmt: skip
    parser.add_argument(
        "--timeout", type=float, default=600.0,
        help="cluster.timeout: how long the actors may take to start and a round to run "
        "(gclab's 120 s is too short for 256 workers on a loaded 2-core machine)",
    )  # fmt: skip
    parser.add_argument(
        "--tries", type=int, default=3, help="attempts per arm when Ray fails to start"
    )
    args = parser.parse_args()
    if not TRACE.is_file():
        raise SystemExit(f"the Tokyo trace is not at {TRACE}")
    if args.quick:
        data = ["data=synthetic", "data.train_size=12288", "data.test_size=1000"]
        workers, batch = 64, 1024
    elif (root := shared_cifar()) is None:
        raise SystemExit(f"the shared CIFAR-10 is not under {SHARED}/data")
    else:
        data = ["data=image_folder", f"data.root={root}"]
        workers, batch = 256, 4096
    overrides = [
        *data, f"cluster.workers={workers}", f"train.batch_size={batch}", "train.rounds=12",
        "train.pipeline=interleaved", "train.models=3", "logger=none", "delay=trace",
        f"delay.path={TRACE}", "network.policy=deadline", f"cluster.timeout={args.timeout:g}",
    ]  # fmt: skip
    print(f"# {machine()}")
    print(f"# python -m gclab <arm> {' '.join(overrides)}")
    out = args.out or Path(tempfile.mkdtemp(prefix="interleaved-check-"))
    out.mkdir(parents=True, exist_ok=True)
    print("| arm | wall s | CPU s (whole tree) | load average after | attempts |")
    print("|---|---|---|---|---|", flush=True)
    for name in args.arms:
        wall, cpu, attempts = run_arm(name, overrides, out / name, args.tries)
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"| {name} | {wall:.0f} | {cpu:.0f} | {load} | {attempts} |", flush=True)
    if not all((out / name / "checkpoint.pt").is_file() for name in ARMS):
        return
    weights = {name: load_checkpoint(out / name / "checkpoint.pt")["models"] for name in ARMS}
    print("\n| model | ‖a − b‖ / ‖b‖ | worst tensor max abs diff / max abs |")
    print("|---|---|---|")
    for i, (a, b) in enumerate(zip(weights["sr_sgc"], weights["uncoded"])):
        norm, worst = differences(a, b)
        print(f"| {i} | {norm:.1e} | {worst:.1e} |")


if __name__ == "__main__":
    main()
