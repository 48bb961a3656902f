"""Principle 2 of DESIGN.md: an exact scheme trains exactly like single-process SGD."""

import json

import numpy as np
import pytest
from hydra.utils import instantiate

from gclab.tracking.artifacts import read_metrics
from helpers.config import TINY, compose_config
from helpers.training import (
    assert_same_weights,
    reference_weights,
    rotating_straggler_trace,
    trained_weights,
)


@pytest.mark.parametrize("extra", [[], ["data.augment=true", "train.nesterov=true"]])
def test_uncoded_on_four_workers_equals_single_process_sgd(ray_session, tmp_path, extra):
    cfg = compose_config([*TINY, "cluster.workers=4", "train.rounds=6", *extra])
    want = reference_weights(cfg)
    got = trained_weights(cfg, tmp_path)
    assert_same_weights(got, want)
    initial = instantiate(cfg.model, num_classes=10).state_dict()
    moved = max(float((want[k] - initial[k]).abs().max()) for k in want)
    assert moved > 1e-3  # the comparison is not between two untrained models


def test_actors_hosting_several_logical_workers_change_nothing(ray_session, tmp_path):
    """Also with actors that reserve nothing (no placement group: Ray places them)."""
    base = [*TINY, "cluster.workers=4", "train.rounds=3"]
    one_each = trained_weights(compose_config([*base, "cluster.actors=4"]), tmp_path / "a")
    packed = compose_config([*base, "cluster.actors=2", "cluster.worker_cpus=0"])
    for key, value in trained_weights(packed, tmp_path / "b").items():
        assert np.array_equal(one_each[key].numpy(), value.numpy())
    for run, actors in [("a", 4), ("b", 2)]:
        summary = json.loads((tmp_path / run / "summary.json").read_text())
        assert (summary["actors"], summary["nodes"]) == (actors, 1)


EXACT_SCHEMES = [
    ["scheme=classic_fr", "scheme.s=1"],
    ["scheme=classic_cr", "scheme.s=1"],
    ["scheme=cce_cr", "scheme.s=1", "scheme.m=2"],
    ["scheme=cce_fr", "scheme.s=1", "scheme.m=3"],
]


@pytest.mark.parametrize("scheme", EXACT_SCHEMES, ids=lambda s: s[0].split("=")[1])
def test_exact_scheme_with_a_straggler_every_round_equals_single_process_sgd(
    ray_session, tmp_path, scheme
):
    trace = rotating_straggler_trace(tmp_path / "trace.npz", 4, 8)
    cfg = compose_config(
        [*TINY, *scheme, "cluster.workers=4", "train.rounds=4", "delay=trace",
         f"delay.path={trace}", "delay.slope=0", "network.policy=deadline", "network.mu=1"]
    )  # fmt: skip
    want = reference_weights(cfg)
    got = trained_weights(cfg, tmp_path / "run")
    assert_same_weights(got, want)
    rounds = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "round"]
    assert [r["erasures"] for r in rounds] == [1, 1, 1, 1]  # the straggler really was erased
    assert not any(r["waited"] for r in rounds)  # ... and decoding never waited for it
