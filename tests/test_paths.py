"""The ``paths`` config (gclab/conf/paths/default.yaml): data, trace and output roots.

Both apps compose it; every root is an environment variable when set, else its default,
and the command line overrides either. The experiments and run directories read their
locations from it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, OmegaConf

import gclab.sim.config  # noqa: F401  (registers the simulator's schema)
from gclab import CONF_DIR
from gclab.rundir.guard import config_text

REPO = CONF_DIR.parents[1]
VARIABLES = {
    "data_dir": "GCLAB_DATA_DIR",
    "trace_dir": "GCLAB_TRACE_DIR",
    "output_dir": "GCLAB_OUTPUT_DIR",
    "multirun_dir": "GCLAB_MULTIRUN_DIR",
}
DEFAULTS = {
    "data_dir": "~/.cache/gclab",
    "trace_dir": "../shared/traces",
    "output_dir": "outputs",
    "multirun_dir": "multirun",
}
MOVED = {
    "data_dir": "/data/gclab",
    "trace_dir": "/data/traces",
    "output_dir": "/scratch/runs",
    "multirun_dir": "/scratch/sweeps",
}
TRACES = [f"lambda-sydney-cnn-w256-r20-load{load}.npz" for load in ("025", "050", "075", "100")]


def composed(name: str, overrides: list[str]) -> DictConfig:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose(name, overrides, return_hydra_config=True)


def sweep_paths(cfg: DictConfig) -> list[str]:
    return [p.strip() for p in cfg.hydra.sweeper.params["delay.path"].split(",")]


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES.values():
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("no_env")
@pytest.mark.parametrize("roots", [DEFAULTS, MOVED], ids=["defaults", "variables"])
def test_every_root_is_its_variable_else_its_default(
    roots: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if roots is MOVED:
        for key, name in VARIABLES.items():
            monkeypatch.setenv(name, MOVED[key])
    train = composed("config", ["experiment=packet_loss_study"])
    assert OmegaConf.to_container(train.paths, resolve=True) == roots
    assert train.data.root == f"{roots['data_dir']}/shared-cifar10"
    assert composed("config", []).data.root == f"{roots['data_dir']}/cifar10"
    assert train.hydra.run.dir.startswith(f"{roots['output_dir']}/")
    assert train.hydra.sweep.dir.startswith(f"{roots['multirun_dir']}/")
    sim = composed("sim", ["experiment=lambda_traces"])
    assert sweep_paths(sim) == [f"{roots['trace_dir']}/{name}" for name in TRACES]
    assert sim.hydra.run.dir.startswith(f"{roots['output_dir']}/sim/")
    assert sim.hydra.sweep.dir.startswith(f"{roots['multirun_dir']}/sim/")


def test_the_command_line_overrides_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GCLAB_TRACE_DIR", "/data/traces")
    sim = composed("sim", ["experiment=lambda_traces", "paths.trace_dir=/mnt/t"])
    assert sweep_paths(sim) == [f"/mnt/t/{name}" for name in TRACES]


@pytest.mark.parametrize("app", ["config", "sim"])
def test_a_misspelt_paths_key_fails_at_compose_time(app: str) -> None:
    with pytest.raises(ConfigCompositionException, match=r"paths\.trace_root"):
        composed(app, ["paths.trace_root=/x"])


@pytest.mark.usefixtures("no_env")
def test_a_resume_may_move_the_roots(monkeypatch: pytest.MonkeyPatch) -> None:
    """The roots are not what is trained; keys that read them are compared resolved."""
    before = composed("config", ["data=synthetic"])
    monkeypatch.setenv("GCLAB_OUTPUT_DIR", "/elsewhere")
    assert config_text(composed("config", ["data=synthetic"])) == config_text(before)
    assert config_text(composed("config", [])) != config_text(
        composed("config", ["paths.data_dir=/elsewhere"])
    )  # data=cifar10 reads its root from paths.data_dir


@pytest.mark.slow
@pytest.mark.no_ray
def test_the_simulator_reads_traces_and_writes_sweeps_under_the_roots(tmp_path: Path) -> None:
    """experiment=lambda_traces end to end with its traces and sweep under two roots."""
    traces = tmp_path / "traces"
    traces.mkdir()
    for k, name in enumerate(TRACES):
        np.savez(traces / name, durations=np.full((4, 3), 1.0 + k), load=0.0)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "GCLAB_TRACE_DIR": str(traces),
        "GCLAB_MULTIRUN_DIR": str(tmp_path / "sweeps"),
    }
    argv = [sys.executable, "-m", "gclab.sim", "experiment=lambda_traces"]
    argv += ["cluster.workers=8", "sim.jobs=2", "delay.slope=0"]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summaries = sorted((tmp_path / "sweeps" / "sim").glob("*/*/*/summary.json"))
    assert len(summaries) == 12  # 3 values of s x 4 traces
    totals = {json.loads(p.read_text())["total_time"] for p in summaries}
    assert totals == {2.0, 4.0, 6.0, 8.0}  # 2 rounds of each trace's constant duration
