"""Parallel sweeps: one ``-m`` sweep with Hydra's basic launcher and with ``hydra/launcher=ray``.

Side by side in one run of this script (serial, then parallel, for each sweep), each
a fresh ``python -m ...`` as a user starts it, timed from start to exit (Ray's start-up
included). A 12-job simulator sweep (``classic_cr`` at n = 256, 4 values of s x 3 straggler
means; each job simulates 2000 jobs, 7-8 s on one core of an AMD EPYC) and a 4-job
training sweep on synthetic data (2 schemes x 2 seeds). The results must not depend on
the launcher: the simulator's summaries are compared byte for byte, the training runs'
test accuracies exactly. Beside the simulator sweep, a static split for comparison: its
two halves (s = 3, 11 and s = 7, 15) as two serial sweeps side by side, without Ray, and
the serial time over theirs. The machine may be shared: the load average and the busiest
other processes are printed at the start and the end.

    python bench/parallel_sweep.py            # 2000 simulated jobs per point, 30 rounds
    python bench/parallel_sweep.py --quick    # 200 simulated jobs, 5 rounds
    python bench/parallel_sweep.py --only simulator   # the simulator sweep alone
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import machine

SIM = [
    "scheme=classic_cr", "scheme.s=3,7,11,15", "cluster.workers=256", "delay=straggler",
    "delay.mean=0.5,1,2",
]  # fmt: skip
TRAIN = [
    "data=synthetic", "data.train_size=4096", "data.test_size=512", "model.width=16",
    "scheme=classic_cr,pipelined_cr", "scheme.s=1", "seed=0,1", "cluster.workers=4",
    "train.batch_size=128", "logger=none",
]  # fmt: skip


def busiest_processes(count: int = 5) -> str:
    """The command lines (cut short) using the most CPU right now, with their %CPU."""
    out = subprocess.run(
        ["ps", "-eo", "pcpu,args", "--sort=-pcpu", "--no-headers"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    rows = [line.strip().split(maxsplit=1) for line in out[:count]]
    return "; ".join(f"{args[:70]} ({cpu}%)" for cpu, args in rows)


def sweep(module: str, overrides: list[str], out: Path) -> float:
    """Seconds one ``python -m module -m ...`` takes, start to exit."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", module, "-m", *overrides, f"hydra.sweep.dir={out}"],
        capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{module} sweep failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def side_by_side(module: str, halves: list[list[str]], out: Path) -> float:
    """Seconds until the last of several ``python -m module -m ...`` run at once exits."""
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", module, "-m", *half, f"hydra.sweep.dir={out}/{i}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, half in enumerate(halves)
    ]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{module} sweep failed:\n{err[-3000:]}")
    return time.perf_counter() - start


def results(out: Path, jobs: int, key: str | None) -> list:
    """Per job: the whole summary.json text, or one key of it."""
    texts = [(out / str(j) / "summary.json").read_text() for j in range(jobs)]
    return texts if key is None else [json.loads(t)[key] for t in texts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 simulated jobs, 5 rounds")
    parser.add_argument("--only", choices=("simulator", "training"), help="one sweep alone")
    args = parser.parse_args()
    sim = [*SIM, f"sim.jobs={200 if args.quick else 2000}"]
    rounds = 5 if args.quick else 30
    train = [*TRAIN, f"train.rounds={rounds}", f"train.eval_every={rounds}"]  # one evaluation
    print(f"# {machine()}")
    print(f"# load average at the start: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"# busiest processes at the start: {busiest_processes()}")
    print("| sweep | jobs | serial (s) | hydra/launcher=ray (s) | speed-up | same results "
          "| two halves side by side, no Ray (s) | their speed-up |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, module, overrides, jobs, key in [
            ("simulator", "gclab.sim", sim, 12, None),
            ("training", "gclab", train, 4, "test_accuracy"),
        ]:
            if args.only not in (None, name):
                continue
            serial = sweep(module, overrides, Path(tmp) / f"{name}-serial")
            parallel = sweep(module, [*overrides, "hydra/launcher=ray"], Path(tmp) / name)
            same = results(Path(tmp) / f"{name}-serial", jobs, key) == results(
                Path(tmp) / name, jobs, key
            )
            halves, split_speedup = "", ""
            if name == "simulator":  # a static split, without Ray
                split = [[o for o in overrides if not o.startswith("scheme.s=")] + [f"scheme.s={s}"]
                         for s in ("3,11", "7,15")]  # fmt: skip
                both = side_by_side(module, split, Path(tmp) / f"{name}-halves")
                halves, split_speedup = f"{both:.1f}", f"{serial / both:.2f}"
            print(
                f"| {name}: {' '.join(overrides)} | {jobs} | {serial:.1f} | {parallel:.1f} "
                f"| **{serial / parallel:.2f}** | {'yes' if same else 'NO'} | {halves} "
                f"| {split_speedup} |",
                flush=True,
            )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"# load average at the end: {load}; busiest processes: {busiest_processes()}")


if __name__ == "__main__":
    main()
