"""``adapt=search`` in training: switches keep exact schemes exact, and survive a resume.

In process (``helpers.inprocess``): 4 workers start uncoded; from round 4 on one worker
(rotating) is 50x slower, so the controller switches to the coded family, and the
weights must still be those of single-process SGD on the same batches.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gclab.app import run
from gclab.errors import ConfigError
from gclab.tracking.artifacts import load_checkpoint, read_metrics
from helpers.config import TINY, compose_config
from helpers.inprocess import Stopped, in_process, stopping_at
from helpers.training import assert_same_weights, reference_weights, trained_weights

FAMILIES = {
    "classic_fr": [],
    "classic_cr": [],
    "cce_cr": [],
    "cce_fr": [],
}


def adaptive_config(tmp_path: Path, family: str, extra: tuple[str, ...] = ()):
    durations = np.ones((4, 16))
    durations[np.arange(4, 16) % 4, np.arange(4, 16)] = 50.0  # a straggler from round 4 on
    np.savez(tmp_path / "trace.npz", durations=durations, load=np.float64(0.0))
    return compose_config(
        [*TINY, "scheme=uncoded", "cluster.workers=4", "train.rounds=8", "delay=trace",
         f"delay.path={tmp_path / 'trace.npz'}", "delay.slope=1", "delay.base_load=0",
         "network.policy=deadline", "network.mu=1", "adapt=search",
         f"adapt.schemes=[uncoded,{family}]", "adapt.every=1", "adapt.window=2", *extra]
    )  # fmt: skip


@pytest.mark.parametrize("family", FAMILIES)
def test_switching_to_an_exact_scheme_equals_single_process_sgd(tmp_path, family):
    cfg = adaptive_config(tmp_path, family)
    got = trained_weights(cfg, tmp_path / "run", in_process)
    assert_same_weights(got, reference_weights(cfg))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert [s["scheme"] for s in summary["switches"]] == [family]
    assert summary["switches"][0]["job"] == 5  # decided on rounds 3 and 4 (the first straggler)
    rounds = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "round"]
    assert [r["waited"] for r in rounds][5:] == [False] * 3  # the straggler is tolerated now


def test_a_run_stopped_after_a_switch_resumes_with_the_new_scheme(tmp_path):
    cfg = adaptive_config(tmp_path, "classic_cr", ("train.checkpoint_every=6",))
    run(cfg, tmp_path / "ref", start_pool=in_process)
    with pytest.raises(Stopped):
        run(cfg, tmp_path / "cut", start_pool=stopping_at(7))
    checkpoint = load_checkpoint(tmp_path / "cut" / "checkpoint.pt")
    assert checkpoint["round"] == 5 and checkpoint["coding"]["adapt"]["switches"]
    resumed = adaptive_config(tmp_path, "classic_cr", ("train.checkpoint_every=6", "resume=true"))
    run(resumed, tmp_path / "cut", start_pool=in_process)
    want = load_checkpoint(tmp_path / "ref" / "checkpoint.pt")["model"]
    assert_same_weights(load_checkpoint(tmp_path / "cut" / "checkpoint.pt")["model"], want)
    summaries = [json.loads((tmp_path / d / "summary.json").read_text()) for d in ("ref", "cut")]
    assert summaries[0]["switches"] == summaries[1]["switches"]


def test_training_refuses_schemes_with_jobs_in_flight(tmp_path):
    from gclab.app import build

    with pytest.raises(ConfigError, match=r"adapt=search in training chooses among schemes with"):
        build(adaptive_config(tmp_path, "sr_sgc"))


@pytest.mark.slow
def test_an_actor_restarted_after_a_switch_rejoins_with_the_new_scheme(ray_session, tmp_path):
    """On Ray: the actor hosting worker 1 crashes in round 6, after the switch to classic_cr
    at job 5; Ray restarts it with the first scheme, the pool moves it to the new one, and
    the packets it recomputes keep the run exact."""
    extra = ("cluster.actors=2", "cluster.worker_cpus=0", "faults.crash=[6:1]")
    cfg = adaptive_config(tmp_path, "classic_cr", extra)
    got = trained_weights(cfg, tmp_path / "run")
    assert_same_weights(got, reference_weights(cfg))
    rounds = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "round"]
    assert rounds[6]["failed"] == 2 and rounds[6]["retransmissions"] >= 1
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert [s["job"] for s in summary["switches"]] == [5]
