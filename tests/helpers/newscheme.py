"""A scheme added outside gclab, run by the simulator's command line as a researcher would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def simulate_cli(package: str, scheme: str, out: Path, *extra: str) -> dict:
    """``python -m gclab.sim`` on ``scheme`` of ``package`` (``hydra.searchpath``), 4 workers,
    20 jobs, straggler delays; its summary."""
    proc = subprocess.run(
        [sys.executable, "-m", "gclab.sim", f"hydra.searchpath=[pkg://{package}]",
         f"scheme={scheme}", "cluster.workers=4", "sim.jobs=20", "delay=straggler",
         f"hydra.run.dir={out}", *extra],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "summary.json").read_text())
