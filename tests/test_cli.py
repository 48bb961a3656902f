"""``python -m gclab`` end to end, as a user runs it (subprocesses, real Ray, offline W&B)."""

import json
import os
import subprocess
import sys
import time

import pytest
import torch

from gclab.tracking.artifacts import load_checkpoint, read_metrics
from helpers.config import TINY
from helpers.net import free_port
from helpers.raycluster import ray_cluster

pytestmark = pytest.mark.slow


def gclab(
    *args: str, cwd=None, timeout: float = 240, env: dict | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "gclab", *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
    )  # fmt: skip


def test_run_writes_metrics_summary_checkpoint_and_offline_wandb(tmp_path):
    out = tmp_path / "run"
    overrides = [o for o in TINY if not o.startswith("logger")]
    proc = gclab(
        *overrides, "train.eval_every=2", "logger.mode=offline", f"hydra.run.dir={out}",
        cwd=tmp_path,  # any working directory works
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = read_metrics(out / "metrics.jsonl")
    rounds = [r for r in records if r["kind"] == "round"]
    evals = [r for r in records if r["kind"] == "eval"]
    assert [r["round"] for r in rounds] == [0, 1, 2, 3]
    assert [r["round"] for r in evals] == [1, 3]
    assert all(r["decode_ms"] >= 0 and r["train_loss"] > 0 for r in rounds)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["test_accuracy"] == evals[-1]["test_accuracy"]
    assert summary["jobs"] == 4 and summary["total_virtual_time"] > 0
    ckpt = load_checkpoint(out / "checkpoint.pt")
    assert ckpt["round"] == 3 and "optimizer" in ckpt and ckpt["model"]
    runs = list((out / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1 and runs[0].stat().st_size > 0
    assert (out / ".hydra" / "config.yaml").is_file()


def test_short_synthetic_run_learns_well_above_chance(tmp_path):
    proc = gclab(
        "data=synthetic", "data.train_size=2048", "data.test_size=512", "model.width=16",
        "train.batch_size=64", "train.rounds=60", "train.eval_every=60", "train.lr=0.02",
        "logger=none", f"hydra.run.dir={tmp_path}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["test_accuracy"] > 0.5  # chance is 0.1


def test_bad_value_exits_with_one_sentence_before_ray(tmp_path):
    proc = gclab(*TINY, "cluster.workers=0", f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 2
    assert "gclab: error: cluster.workers=0 is invalid" in proc.stderr
    assert "Traceback" not in proc.stderr and "Started a local Ray" not in proc.stderr
    assert not (tmp_path / "metrics.jsonl").exists()


def test_help_lists_the_config_groups():
    proc = gclab("--help", timeout=60)
    assert proc.returncode == 0
    for group in ("scheme", "model", "data", "cluster", "delay", "logger"):
        assert f"{group}:" in proc.stdout or f"{group}/" in proc.stdout


def test_cluster_ray_joins_a_real_head_node(tmp_path):
    with ray_cluster(2) as (address, auth):
        proc = gclab(
            *TINY, "cluster=ray", f"cluster.address={address}", "cluster.workers=2",
            "cluster.worker_cpus=0.5", f"hydra.run.dir={tmp_path / 'run'}", env=auth,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["nodes"] == 1


def test_spread_puts_workers_on_both_nodes_and_changes_no_weight(tmp_path):
    """Two Ray nodes of 2 CPUs: both actors fit on one, so only ``spread`` uses both."""
    runs = {}
    with ray_cluster(2, 2) as (address, auth):
        for placement in ("spread", "pack"):
            out = tmp_path / placement
            proc = gclab(
                *TINY, "cluster=ray", f"cluster.address={address}", "cluster.workers=4",
                "cluster.actors=2", "cluster.worker_cpus=0.5", f"cluster.placement={placement}",
                f"hydra.run.dir={out}", env=auth,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
            runs[placement] = json.loads((out / "summary.json").read_text())["nodes"]
    assert runs == {"spread": 2, "pack": 1}
    spread = load_checkpoint(tmp_path / "spread" / "checkpoint.pt")["model"]
    pack = load_checkpoint(tmp_path / "pack" / "checkpoint.pt")["model"]
    assert all(torch.equal(spread[k], pack[k]) for k in spread)


def test_cluster_ray_with_nobody_listening_fails_clearly_and_quickly(tmp_path):
    start = time.time()
    proc = gclab(
        *TINY, "cluster=ray", f"cluster.address=127.0.0.1:{free_port()}",
        f"hydra.run.dir={tmp_path}", timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "no Ray cluster answered" in proc.stderr
    assert time.time() - start < 90


def test_sweep_reports_a_failing_job_and_finishes_the_others(tmp_path):
    proc = gclab(
        "-m", *TINY, "train.rounds=2", "cluster.workers=2,0", f"hydra.sweep.dir={tmp_path}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "gclab: error: cluster.workers=0 is invalid" in proc.stderr
    good, bad = tmp_path / "0", tmp_path / "1"
    assert json.loads((good / "summary.json").read_text())["jobs"] == 2
    assert "cluster.workers=0 is invalid" in (bad / "error.txt").read_text()
    assert not (bad / "summary.json").exists() and not (good / "error.txt").exists()


def test_sweep_over_schemes_with_a_shared_key_runs_every_job_with_it(tmp_path):
    proc = gclab(
        "-m", *TINY, "train.rounds=2", "scheme=classic_cr,pipelined_cr", "scheme.s=1",
        f"hydra.sweep.dir={tmp_path}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    for job, scheme in enumerate(["classic_cr", "pipelined_cr"]):
        summary = json.loads((tmp_path / str(job) / "summary.json").read_text())
        assert summary["scheme"] == scheme and summary["jobs"] == 2
        config = (tmp_path / str(job) / ".hydra" / "config.yaml").read_text()
        assert "  s: 1\n" in config
