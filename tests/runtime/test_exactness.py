"""Principle 2 of docs/design.md: an exact scheme trains exactly like single-process SGD.

The matrix runs the whole loop with the workers in this process (``helpers.inprocess``:
the same WorkerHost code, no Ray); one representative runs on real Ray actors.
"""

import json

import numpy as np
import pytest
from hydra.utils import instantiate

from gclab.runtime.timing import processor
from gclab.tracking.artifacts import read_metrics
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process
from helpers.training import (
    assert_same_weights,
    reference_weights,
    rotating_straggler_trace,
    trained_weights,
)


@pytest.mark.parametrize("extra", [[], ["data.augment=true", "train.nesterov=true"]])
def test_uncoded_on_four_workers_equals_single_process_sgd(tmp_path, extra):
    cfg = compose_config([*TINY, "cluster.workers=4", "train.rounds=6", *extra])
    want = reference_weights(cfg)
    got = trained_weights(cfg, tmp_path, in_process)
    assert_same_weights(got, want)
    initial = instantiate(cfg.model, num_classes=10).state_dict()
    moved = max(float((want[k] - initial[k]).abs().max()) for k in want)
    assert moved > 1e-3  # the comparison is not between two untrained models


@pytest.mark.parametrize("scheme", [["scheme=uncoded"], ["scheme=classic_cr", "scheme.s=2"]])
def test_hosts_with_several_logical_workers_change_nothing(tmp_path, scheme):
    """One host computes a partition that several of its workers hold once (classic_cr)."""
    base = [*TINY, *scheme, "cluster.workers=4", "train.rounds=3"]
    one_each = trained_weights(
        compose_config([*base, "cluster.actors=4"]), tmp_path / "a", in_process
    )
    packed = trained_weights(
        compose_config([*base, "cluster.actors=1"]), tmp_path / "b", in_process
    )
    for key in one_each:
        assert np.array_equal(one_each[key].numpy(), packed[key].numpy())


EXACT_SCHEMES = [
    ["scheme=classic_fr", "scheme.s=1"],
    ["scheme=classic_cr", "scheme.s=1"],
    ["scheme=cce_cr", "scheme.s=1", "scheme.m=2"],
    ["scheme=cce_fr", "scheme.s=1", "scheme.m=3"],
]


def straggler_config(tmp_path, scheme: list[str], extra: tuple[str, ...] = ()):
    """4 workers, 4 jobs, worker ``r mod 4`` 50x slower in round r (erased, tolerated)."""
    trace = rotating_straggler_trace(tmp_path / "trace.npz", 4, 8)
    return compose_config(
        [*TINY, *scheme, "cluster.workers=4", "train.rounds=4", "delay=trace",
         f"delay.path={trace}", "delay.slope=0", "network.policy=deadline", "network.mu=1",
         *extra]
    )  # fmt: skip


def assert_erased_and_never_waited(run_dir) -> None:
    rounds = [r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "round"]
    assert [r["erasures"] for r in rounds] == [1, 1, 1, 1]  # the straggler really was erased
    assert not any(r["waited"] for r in rounds)  # ... and decoding never waited for it


@pytest.mark.parametrize("scheme", EXACT_SCHEMES, ids=lambda s: s[0].split("=")[1])
def test_exact_scheme_with_a_straggler_every_round_equals_single_process_sgd(tmp_path, scheme):
    cfg = straggler_config(tmp_path, scheme)
    got = trained_weights(cfg, tmp_path / "run", in_process)
    assert_same_weights(got, reference_weights(cfg))
    assert_erased_and_never_waited(tmp_path / "run")


@pytest.mark.slow
def test_on_ray_actors_hosting_two_workers_a_straggler_every_round_stays_exact(
    ray_session, tmp_path
):
    """The representative on real Ray: classic_cr, 4 workers packed into 2 actors.

    The actors reserve nothing, so no placement group holds them: Ray places them.
    """
    extra = ("cluster.actors=2", "cluster.worker_cpus=0")
    cfg = straggler_config(tmp_path, EXACT_SCHEMES[1], extra)
    got = trained_weights(cfg, tmp_path / "run")
    assert_same_weights(got, reference_weights(cfg))
    assert_erased_and_never_waited(tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["actors"], summary["nodes"]) == (2, 1)
    assert summary["processors"] == [processor("cpu")]  # both actors, one machine
