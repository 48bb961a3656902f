"""Runs of ``python -m gclab`` interrupted from outside, as a user or a scheduler does it."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from gclab.tracking.artifacts import read_metrics
from helpers.config import TINY

ROOT = Path(__file__).resolve().parents[2]

#: A run of 40 rounds, checkpointed every 10: long enough to interrupt, short enough for
#: float32 training to stay within assert_same_weights of plain SGD (after 100 steps
#: the summation order's differences have grown past it).
LONG = [
    *[o for o in TINY if not o.startswith(("train.rounds", "model.width"))],
    "model.width=32",
    "train.rounds=40",
    "train.checkpoint_every=10",
    "cluster.workers=2",
    "cluster.worker_cpus=0.5",
]


def env(**extra: str) -> dict[str, str]:
    """The environment of a driver (and of Ray nodes) that imports this checkout."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "WANDB_MODE": "offline", **extra}


def start(args: list[str], environment: dict[str, str] | None = None) -> subprocess.Popen:
    """``python -m gclab args`` in its own session (a terminal's Ctrl-C reaches its group)."""
    return subprocess.Popen(
        [sys.executable, "-m", "gclab", *args], cwd=ROOT, env=environment or env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def rounds(run_dir: Path) -> list[int]:
    """The rounds in ``run_dir``'s metrics.jsonl."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    return [r["round"] for r in read_metrics(path) if r["kind"] == "round"]


def wait_for_rounds(
    run_dir: Path, proc: subprocess.Popen, count: int, timeout: float = 300
) -> None:
    """Return once ``count`` rounds are recorded (the run must still be running)."""
    deadline = time.monotonic() + timeout
    while len(rounds(run_dir)) < count:
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert time.monotonic() < deadline, f"{count} rounds not reached in {timeout} s"
        time.sleep(0.05)


def last_line(stderr: str) -> str:
    """The process's last line on stderr."""
    return stderr.strip().splitlines()[-1]


def resume_args(line: str) -> list[str]:
    """The overrides of the command the ending sentence gives."""
    words = shlex.split(line.split("resume with: ", 1)[1])
    assert words[:3] == ["python", "-m", "gclab"], line
    return words[3:]
