"""The sentence a run ends with when it is stopped from outside (:mod:`gclab.rundir.interrupts`).

It says why, the last round the run recorded, the round its checkpoint holds and the
command that continues it from there, read from the run directory itself.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from gclab.tracking.artifacts import load_checkpoint, read_metrics

#: Overrides the resume command sets itself.
OWN_KEYS = ("hydra.run.dir", "resume")


def resume_command(run_dir: Path, overrides: list[str]) -> str:
    """``python -m gclab <the run's overrides> hydra.run.dir=<run_dir> resume=true``."""
    kept = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] not in OWN_KEYS]
    words = ["python", "-m", "gclab", *kept, f"hydra.run.dir={run_dir.absolute()}", "resume=true"]
    return shlex.join(words)


def stopped_sentence(reason: str, run_dir: Path, overrides: list[str]) -> str:
    """``<reason> after round 42; checkpoint.pt holds round 39: resume with: <command>``."""
    metrics, checkpoint = run_dir / "metrics.jsonl", run_dir / "checkpoint.pt"
    rounds = [r["round"] for r in read_metrics(metrics) if r["kind"] == "round"] if (
        metrics.is_file()
    ) else []  # fmt: skip
    reached = f"after round {max(rounds)}" if rounds else "before its first round ended"
    if not checkpoint.is_file():
        return (
            f"{reason} {reached}; {run_dir} holds no checkpoint.pt to resume from "
            "(none was due yet, or train.checkpoint_every=0): run it again."
        )
    saved = load_checkpoint(checkpoint, mmap=True)["round"]
    return (
        f"{reason} {reached}; {checkpoint} holds round {saved}, resume with: "
        f"{resume_command(run_dir, overrides)}"
    )
