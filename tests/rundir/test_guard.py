"""A run directory's record is never overwritten; a resume continues it (gclab/rundir/guard.py).

The end-to-end test runs the command line as a user would: a run that fails, a resume
refused for a changed override (the directory stays byte for byte as it was), then the
accepted resume: the original ``.hydra/`` record is kept, the segment's record is stored
beside it, metrics.jsonl and the offline W&B run hold every round once, and the weights
are those of an uninterrupted run.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from gclab import CONF_DIR
from gclab.app import run
from gclab.errors import ConfigError
from gclab.rundir.guard import RunDirGuard, segment_subdir
from gclab.rundir.lock import LOCK_FILE
from gclab.tracking.artifacts import load_checkpoint, read_metrics
from gclab.tracking.loggers import ID_FILE
from helpers.config import TINY, compose_config, hydra_config
from helpers.inprocess import in_process
from helpers.training import assert_same_weights
from helpers.wandb_records import read_run


def test_guard_refuses_a_used_directory_before_touching_it(tmp_path: Path, capsys) -> None:
    fresh = hydra_config(TINY, tmp_path / "new")
    RunDirGuard.check_run(fresh)  # locks the directory: its lock file is all there is
    assert fresh.hydra.output_subdir == ".hydra"
    assert [p.name for p in (tmp_path / "new").iterdir()] == [LOCK_FILE]
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "metrics.jsonl").write_text("")  # a run that stopped before round 0
    RunDirGuard.check_run(hydra_config(TINY, tmp_path / "used"))
    (tmp_path / "used" / "metrics.jsonl").write_text('{"kind": "round", "round": 0}\n')
    with pytest.raises(ConfigError, match=r"already holds a run \(metrics\.jsonl\); it has no"):
        RunDirGuard.check_run(hydra_config(TINY, tmp_path / "used"))
    with pytest.raises(SystemExit) as info:  # Hydra swallows a callback's exceptions
        RunDirGuard().on_run_start(hydra_config([*TINY, "resume=true"], tmp_path / "used"))
    assert info.value.code == 2
    assert capsys.readouterr().err.startswith("gclab: error: resume=true but ")
    assert sorted(p.name for p in (tmp_path / "used").iterdir()) == [LOCK_FILE, "metrics.jsonl"]


def test_a_sweep_cannot_resume_nor_reuse_a_sweep_directory(tmp_path: Path) -> None:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        sweep = compose(
            "config", [*TINY, "resume=true", f"hydra.sweep.dir={tmp_path}"],
            return_hydra_config=True,
        )  # fmt: skip
    with pytest.raises(ConfigError, match="resume=true continues one run, not a sweep"):
        RunDirGuard.check_sweep(sweep)
    (tmp_path / "3").mkdir(parents=True)
    (tmp_path / "3" / "checkpoint.pt").write_bytes(b"x")
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        again = compose("config", [*TINY, f"hydra.sweep.dir={tmp_path}"], return_hydra_config=True)
    with pytest.raises(ConfigError, match=r"hydra\.sweep\.dir=.* already holds 1 run\(s\)"):
        RunDirGuard.check_sweep(again)


def test_each_resumed_segment_gets_its_own_record(tmp_path: Path) -> None:
    assert segment_subdir(tmp_path) == ".hydra-resume-1"
    (tmp_path / ".hydra-resume-1").mkdir()
    assert segment_subdir(tmp_path) == ".hydra-resume-2"
    run(compose_config(TINY), tmp_path, start_pool=in_process)
    resumed = hydra_config([*TINY, "resume=true"], tmp_path)
    OmegaConf.set_readonly(resumed.hydra, True)  # as Hydra hands it to callbacks
    RunDirGuard().on_run_start(resumed)
    assert resumed.hydra.output_subdir == ".hydra-resume-2"


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def gclab(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    return subprocess.run(
        [sys.executable, "-m", "gclab", *args], capture_output=True, text=True, timeout=300,
        env=env,
    )  # fmt: skip


@pytest.mark.slow
def test_failed_run_refused_resume_then_resume_keep_the_whole_record(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [
        *[o for o in TINY if not o.startswith("logger")], "logger=wandb", "logger.mode=offline",
        "scheme=pipelined_cr", "scheme.s=1", "scheme.T=1", "cluster.workers=4",
        "train.rounds=10", "train.checkpoint_every=5", "network.policy=all",
        f"hydra.run.dir={out}",
    ]  # fmt: skip
    # two workers' actors crash in round 5: job 5 loses 4 packets in its window (T=1
    # tolerates 2) and their encoders' state is gone, so the run stops in round 6
    failed = gclab(*args, "faults.crash=[5:0,5:1]")
    assert failed.returncode == 1 and "RecoveryError" in failed.stderr, failed.stderr[-3000:]
    assert load_checkpoint(out / "checkpoint.pt")["round"] == 4
    before = digests(out)

    refused = gclab(*args, "train.lr=0.1", "resume=true")
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .startswith("gclab: error: resume=true but the config differs from the one that wrote")
    )
    assert "train.lr: 0.05 in the run, 0.1 now" in refused.stderr
    assert digests(out) == before  # byte for byte, .hydra/ included

    resumed = gclab(*args, "resume=true")  # the faults are not part of what is resumed
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = digests(out)
    assert {k: v for k, v in after.items() if k.startswith(".hydra/")} == {
        k: v for k, v in before.items() if k.startswith(".hydra/")
    }
    segment = (out / ".hydra-resume-1" / "overrides.yaml").read_text()
    assert "resume=true" in segment and "faults" not in segment
    assert "faults.crash=[5:0,5:1]" in (out / ".hydra" / "overrides.yaml").read_text()

    rounds = [r["round"] for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "round"]
    assert rounds == list(range(len(rounds))) and len(rounds) >= 10  # each round once
    run_id = (out / ID_FILE).read_text().strip()
    files = sorted((out / "wandb").glob("offline-run-*/run-*.wandb"))
    assert [f.name for f in files] == [f"run-{run_id}.wandb"] * 2  # two segments, one run
    segments = [read_run(f) for f in files]
    assert [s["exit_code"] for s in segments] == [1, 0]
    logged = [h["round"] for s in segments for h in s["history"] if h.get("kind") == "round"]
    assert logged == rounds  # every round once, in order
    steps = [h["_step"] for s in segments for h in s["history"] if "round" in h]
    assert steps == sorted(set(steps))  # the second segment's steps continue the first's

    reference = tmp_path / "reference"  # the same run, uninterrupted, workers in process
    cfg_args = [a for a in args if not a.startswith(("hydra.", "logger"))] + ["logger=none"]
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", cfg_args)
    run(cfg, reference, start_pool=in_process)
    ran = [r["round"] for r in read_metrics(reference / "metrics.jsonl") if r["kind"] == "round"]
    assert rounds == ran  # the rounds the uninterrupted run ran (no idle drain round)
    want = load_checkpoint(reference / "checkpoint.pt")["model"]
    assert_same_weights(load_checkpoint(out / "checkpoint.pt")["model"], want)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs"] == 10
