"""The ``adapt`` group in both apps: its default, and bad values in one sentence up front."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gclab
from gclab.adapt.decide import controller
from gclab.app import build
from gclab.errors import ConfigError
from gclab.sim.__main__ import prepare
from helpers.config import TINY, compose_config

LONG = (
    r"adapt\.window=50 is longer than the run \((sim\.jobs|train\.rounds)=20 jobs\): use a window"
)
BAD = [
    (["adapt.schemes=[classic_cr,nope]"],
     r"adapt\.schemes has 'nope', which is not a scheme option: the options are .*\."),
    (["cluster.workers=2", "adapt.schemes=[classic_cr,cce_fr]"],
     r"adapt\.schemes\.cce_fr\.s=1, adapt\.schemes\.cce_fr\.m=3 needs s \+ m <= n but n=2; .*\."),
    (["adapt.every=0"], r"adapt\.every=0 is invalid: it must be an integer >= 1\."),
    (["adapt.window=-1"], r"adapt\.window=-1 is invalid: it must be an integer >= 1\."),
    (["adapt.window=50"], LONG + r" of at most the run's jobs\."),
    (["adapt.memories=[10,0]"],
     r"adapt\.memories=\[10, 0\] is invalid: give one or more lengths in rounds, each an "
     r"integer >= 1\."),
    (["adapt.judge=0"], r"adapt\.judge=0\.0 is invalid: it must be a half-life in rounds > 0\."),
]  # fmt: skip
IDS = ["scheme", "option", "every", "window", "long", "memories", "judge"]


def sim(cwd: Path, *overrides: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """``python -m gclab.sim`` in ``cwd``, importing this checkout's gclab."""
    env = {**os.environ, "PYTHONPATH": str(Path(gclab.__file__).parents[1])}
    return subprocess.run(
        [sys.executable, "-m", "gclab.sim", *overrides],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip


def sim_controller(extra: list[str]):
    cfg = compose_config(["adapt=search", "sim.jobs=20", *extra], name="sim")
    scheme, delay, network, _ = prepare(cfg)
    return controller(cfg, scheme, delay, network, cfg.sim.payload_bytes, cfg.sim.jobs, "sim.jobs")


def one_sentence(message: str, pattern: str) -> None:
    assert re.fullmatch(pattern, message), message
    assert "\n" not in message


@pytest.mark.parametrize(("extra", "pattern"), BAD, ids=IDS)
def test_simulator_refuses_bad_adapt_values(extra: list[str], pattern: str) -> None:
    with pytest.raises(ConfigError) as info:
        sim_controller(extra)
    one_sentence(str(info.value), pattern)


@pytest.mark.parametrize(("extra", "pattern"), BAD, ids=IDS)
def test_training_refuses_bad_adapt_values_before_ray(extra: list[str], pattern: str) -> None:
    cfg = compose_config([*TINY, "adapt=search", "train.rounds=20", *extra])
    with pytest.raises(ConfigError) as info:
        build(cfg)
    one_sentence(str(info.value), pattern)


def test_adaptation_is_off_by_default_in_both_apps() -> None:
    assert sim_controller(["adapt=off"]) is None
    assert compose_config([]).adapt._target_ == "gclab.adapt.options.Off"
    searched = compose_config(["adapt=search"], name="sim").adapt
    assert (searched.every, searched.window, searched.schemes) == (1, 10, None)
    assert (searched.memories, searched.judge) == ([10, 20, 40, 80], 20.0)


@pytest.mark.slow
@pytest.mark.no_ray
@pytest.mark.parametrize("recovery", ["decodable", "wait_all"])
def test_the_simulator_command_records_switches(tmp_path: Path, recovery: str) -> None:
    durations = np.ones((8, 40))
    durations[[1, 4, 6], 10:] = 30.0  # three heavy stragglers from round 10 on
    np.savez(tmp_path / "t.npz", durations=durations, load=np.float64(0.0))
    out = tmp_path / "run"
    proc = sim(
        tmp_path, f"hydra.run.dir={out}", "adapt=search", "adapt.schemes=[classic_cr,sr_sgc]",
        "scheme=classic_cr", "scheme.s=1", "cluster.workers=8", "sim.jobs=30", "delay=trace",
        "delay.path=t.npz", "delay.base_load=0", f"network.recovery={recovery}",
        "adapt.window=4",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["switches"] and summary["switches"][0]["job"] > 10
    assert set(summary["switches"][0]) == {"job", "scheme", "params", "setting", "memory"}
    assert summary["decisions"] >= len(summary["switches"]) and summary["decide_seconds"] > 0
    lines = (out / "rounds.csv").read_text().splitlines()
    assert lines[0].endswith(",switched")
    assert sum(int(line.rsplit(",", 1)[1]) for line in lines[1:]) == len(summary["switches"])


@pytest.mark.slow
@pytest.mark.no_ray
def test_simulator_refuses_adapting_and_searching_together(tmp_path: Path) -> None:
    """Through ``python -m gclab.sim``: the refusal comes from its task function."""
    proc = sim(tmp_path, f"hydra.run.dir={tmp_path}", "adapt=search", "sim.search=true")
    assert proc.returncode == 2
    assert "adapt=search cannot be combined with sim.search=true" in proc.stderr


def test_adaptation_refuses_partial_recovery() -> None:
    with pytest.raises(ConfigError) as info:
        sim_controller(["network.recovery=partial", "scheme=classic_fr"])
    one_sentence(str(info.value), r"adapt=search does not combine with network\.recovery=partial.*")
