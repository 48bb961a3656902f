"""``hydra/launcher=ray``: sweeps of both apps as parallel Ray tasks, end to end.

Each case starts its own private Ray (subprocesses, as a user runs them); a sweep's
jobs land in the same directories with the same files as with the basic launcher. How
many jobs run at once is decided before Ray matters, and tested without it.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import gclab.sim.config  # noqa: F401  (registers the simulator's schema, to compose sim.yaml)
from helpers.config import TINY, compose_config
from helpers.wandb_records import read_run
from hydra_plugins.gclab_launcher.ray_launcher import RayLauncher

RAY = "hydra/launcher=ray"


def app(
    module: str, *args: str, cwd: Path | None = None, env: dict | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True, text=True, timeout=600, env=env, cwd=cwd,
    )  # fmt: skip


def test_jobs_in_flight_are_as_many_as_the_cluster_holds_at_once() -> None:
    """Each training job holds its actors' CPUs: one waiting inside Ray for another's
    would run out its start-up deadline, so the launcher holds it back instead."""
    launcher = RayLauncher()
    jobs = [
        compose_config([*TINY, f"cluster.workers={n}", "cluster.worker_cpus=1"]) for n in (2, 4)
    ]
    assert launcher._room(jobs, {"CPU": 8.0}) == 2  # by the 4-actor job's 4 CPUs
    assert launcher._room(jobs, {"CPU": 3.0}) == 1  # one at a time, never none
    packed = compose_config([*TINY, "cluster.workers=4", "cluster.worker_cpus=0.5"])
    assert launcher._room([packed], {"CPU": 2.0}) == 2  # 2 actors (one per core): 1 CPU
    wall = compose_config(
        [*TINY, "network.clock=wall", "cluster.workers=4", "cluster.worker_cpus=0.5"]
    )
    assert launcher._room([wall], {"CPU": 2.0}) == 1  # one actor per worker: 2 CPUs
    bad = compose_config([*TINY, "cluster.workers=0"])  # reports its own error: holds nothing
    assert launcher._room([bad], {"CPU": 2.0}) == 1
    sims = [compose_config(["sim.jobs=3"], name="sim")] * 3
    assert launcher._room(sims, {"CPU": 2.0}) == 2  # a CPU each
    assert RayLauncher(num_cpus=0.5)._room(sims, {"CPU": 2.0}) == 4


@pytest.mark.slow
def test_simulator_sweep_in_parallel_writes_what_the_serial_one_writes(tmp_path: Path) -> None:
    sweep = ["-m", "scheme=classic_cr,pipelined_cr", "scheme.s=1", "cluster.workers=8,0",
             "sim.jobs=30", "delay=bernoulli", "delay.p=0.1"]  # fmt: skip
    for launcher in ("basic", "ray"):
        proc = app("gclab.sim", *sweep, f"hydra/launcher={launcher}",
                   f"hydra.sweep.dir={tmp_path / launcher}")  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
    for job in range(4):
        serial, parallel = tmp_path / "basic" / str(job), tmp_path / "ray" / str(job)
        for name in ("summary.json", "rounds.csv", "error.txt"):
            assert (serial / name).is_file() == (parallel / name).is_file(), (job, name)
            if (serial / name).is_file():
                assert (serial / name).read_text() == (parallel / name).read_text(), (job, name)
    assert "cluster.workers=0 is invalid" in (tmp_path / "ray" / "1" / "error.txt").read_text()
    report = app("gclab.report", str(tmp_path / "ray"))
    assert report.returncode == 0, report.stderr[-3000:]
    assert (tmp_path / "ray" / "summary.csv").is_file()


@pytest.mark.slow
def test_training_sweep_in_parallel_keeps_errors_and_wandb_groups(tmp_path: Path) -> None:
    overrides = [o for o in TINY if not o.startswith("logger")]
    proc = app(
        "gclab", "-m", *overrides, "logger=wandb", "logger.mode=offline", "train.rounds=3",
        "scheme=pipelined_cr", "scheme.s=1", "cluster.workers=4,0", RAY,
        "cluster.actors=4", "cluster.worker_cpus=1",  # more CPUs than this machine's 2, as alone
        "hydra.sweep.dir=multirun/sweep", cwd=tmp_path,  # relative, as by default
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = tmp_path / "multirun" / "sweep"
    summary = json.loads((sweep / "0" / "summary.json").read_text())
    assert summary["scheme"] == "pipelined_cr" and summary["jobs"] == 3
    (run_file,) = (sweep / "0" / "wandb").glob("offline-run-*/run-*.wandb")
    logged = read_run(run_file)
    assert logged["group"] == "multirun/sweep"  # what the basic launcher gives
    hydra = OmegaConf.load(sweep / "0" / ".hydra" / "hydra.yaml").hydra
    assert logged["name"] == hydra.job.override_dirname
    assert "cluster.workers=0 is invalid" in (sweep / "1" / "error.txt").read_text()
    assert "gclab: error: cluster.workers=0 is invalid" in proc.stderr
    report = app("gclab.report", str(sweep))
    assert report.returncode == 0, report.stderr[-3000:]


@pytest.mark.slow
def test_training_sweep_runs_on_the_cluster_at_cluster_address(
    tmp_path: Path, two_nodes: tuple[str, dict[str, str]]
) -> None:
    """``cluster=ray``: the launcher joins ``cluster.address`` and the jobs' actors with it."""
    address, auth = two_nodes
    proc = app(
        "gclab", "-m", *TINY, "cluster=ray", f"cluster.address={address}",
        "cluster.workers=2", "cluster.worker_cpus=0.5", "seed=0,1", RAY,
        f"hydra.sweep.dir={tmp_path}", env=auth,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Started a local Ray" not in proc.stderr  # it joined the cluster
    for job in (0, 1):
        summary = json.loads((tmp_path / str(job) / "summary.json").read_text())
        assert summary["jobs"] == 4 and summary["nodes"] == 2  # spread by cluster=ray


CRASHING_APP = """
import os
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig


@hydra.main(version_base="1.3", config_path=None, config_name=None)
def main(cfg):
    if cfg.crash:
        os._exit(3)  # the job's process dies, as on a machine failure or the OOM killer
    Path(HydraConfig.get().runtime.output_dir, "done.txt").write_text("done")


if __name__ == "__main__":
    main()
"""


@pytest.mark.slow
def test_a_job_whose_process_dies_gets_error_txt_and_the_others_finish(tmp_path: Path) -> None:
    (tmp_path / "crashing.py").write_text(CRASHING_APP)
    proc = subprocess.run(
        [sys.executable, "crashing.py", "-m", "+crash=false,true,false", RAY,
         f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1  # Hydra reports the failed job once the sweep is done
    sweep = tmp_path / "sweep"
    assert (sweep / "0" / "done.txt").is_file() and (sweep / "2" / "done.txt").is_file()
    error = (sweep / "1" / "error.txt").read_text()
    assert error.startswith("WorkerCrashedError") or "died" in error.lower(), error
