"""``network.recovery=partial`` in the simulator and the round protocol (docs/simulator.md).

A round ends at its close; FR's coverage is the share of groups with a packet in time,
round by round on a trace; rounds whose job decodes give the gradient ``decodable``
gives, bit for bit; the search takes the mode through the engine.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from gclab.coding.classic import ClassicCR, ClassicFR
from gclab.coding.is_cr import IsCR
from gclab.coding.is_hr import IsHR
from gclab.network import Finished, NetworkConfig, RoundProtocol
from gclab.network.trace import Trace
from gclab.schemas import instantiate_checked
from gclab.sim.engine import simulate
from gclab.sim.search import search
from helpers.coding import packets, partials
from helpers.windows import largest, mask


@pytest.fixture()
def trace(tmp_path: Path) -> Path:
    """8 workers × 40 rounds: 1 s, sometimes 3 s or 10 s (late at μ = 0.5)."""
    rng = np.random.default_rng(5)
    durations = 1.0 + rng.choice([0.0, 0.1, 2.0, 9.0], p=[0.5, 0.2, 0.2, 0.1], size=(8, 40))
    np.savez(tmp_path / "trace.npz", durations=durations, load=0.0)
    return tmp_path / "trace.npz"


def test_fr_coverage_is_the_share_of_groups_with_a_packet_in_time(trace: Path) -> None:
    delay = Trace(str(trace), slope=0.0)
    network = NetworkConfig(policy="deadline", mu=0.5, recovery="partial")
    result = simulate(ClassicFR(8, 1), delay, network, 40, seed=0)
    durations = np.load(trace)["durations"]
    close = np.minimum(1.5 * durations.min(axis=0), durations.max(axis=0))
    in_time = durations <= close  # [worker, round]
    groups = in_time.reshape(4, 2, 40).any(axis=1)  # [group, round]
    assert result.index.tolist() == list(range(40))
    np.testing.assert_array_equal(result.coverage, groups.mean(axis=0))
    np.testing.assert_allclose(result.durations, close)  # never waits past the close
    assert result.retransmissions.sum() == 0 and not result.waited.any()
    assert 0 < result.coverage.min() < 1 and (result.coverage == 1).any()
    assert result.summary()["coverage_mean"] == pytest.approx(groups.mean())


@pytest.mark.parametrize(
    "scheme", [IsCR(8, 2), IsHR(8, 2, 1, 2), IsHR(8, 4, 1, 2)], ids=lambda s: s.describe()
)
def test_repetition_coverage_is_the_largest_disjoint_set_in_time(trace: Path, scheme) -> None:
    delay = Trace(str(trace), slope=0.0)
    network = NetworkConfig(policy="deadline", mu=0.5, recovery="partial")
    result = simulate(scheme, delay, network, 40, seed=0)
    durations = np.load(trace)["durations"]
    in_time = durations <= np.minimum(1.5 * durations.min(axis=0), durations.max(axis=0))
    w = scheme.windows
    best = largest(8, w.c, w.c1, w.g)
    want = [best[mask(np.flatnonzero(in_time[:, r]))] * w.c / 8 for r in range(40)]
    np.testing.assert_array_equal(result.coverage, want)
    assert 0 < result.coverage.min() < 1 and (result.coverage == 1).any()
    waited = simulate(scheme, delay, NetworkConfig(policy="deadline", mu=0.5), 40, seed=0)
    assert (waited.coverage == 1).all() and waited.total_time > result.total_time


@pytest.mark.parametrize(
    "scheme", [ClassicFR(8, 1), ClassicCR(8, 2), IsHR(8, 4, 1, 2)], ids=["fr", "cr", "is_hr"]
)
def test_exact_rounds_are_bit_identical_to_decodable(trace: Path, scheme) -> None:
    grads = partials(scheme, 257, seed=3).astype(np.float32)
    sent = [packets(scheme, grads, r) for r in range(40)]

    def payload(r: int, w: int) -> np.ndarray:
        return sent[r][w]

    def run(recovery: str) -> tuple[dict[int, np.ndarray], list[int]]:
        network = NetworkConfig(policy="deadline", mu=0.5, rto=0.5, recovery=recovery)
        protocol = RoundProtocol(network, Trace(str(trace), slope=0.0), 8, seed=0)
        exact, partial = {}, []
        for r in range(40):
            # a fresh decoder per round (T = 0 keeps nothing else across rounds): the
            # weights cached per survivor set keep the order of the round that first saw
            # it, and recovery in `decodable` sees other orders than `partial` does
            decoder = scheme.decoder(grads.shape[1])
            out = protocol.run_round(r, Finished(np.zeros(8)), decoder, payload)
            exact.update({job: decoder.decode(job) for job in out.decodable})
            for job in out.partial:
                decoder.decode_partial(job)
                partial.append(job)
        return exact, partial

    exact, partial = run("partial")
    reference, _ = run("decodable")
    assert partial and len(exact) == 40 - len(partial)
    for job, gradient in exact.items():
        assert np.array_equal(gradient, reference[job]), job


def test_search_takes_partial_through_the_engine(trace: Path) -> None:
    network = NetworkConfig(policy="deadline", mu=0.5, recovery="partial")
    node = OmegaConf.create({"_target_": "gclab.coding.classic.ClassicFR"})
    trials = search(node, 8, Trace(str(trace), slope=0.0), network, 20, 0)
    assert [t.params["s"] for t in trials] and all(
        0 < t.result.summary()["coverage_mean"] <= 1 for t in trials
    )
    assert any(t.result.coverage.min() < 1 for t in trials)


@pytest.mark.parametrize("target", ["gclab.coding.is_cr.IsCR", "gclab.coding.is_hr.IsHR"])
def test_search_runs_the_repetition_grids(trace: Path, target: str) -> None:
    network = NetworkConfig(policy="deadline", mu=0.5, recovery="partial")
    node = OmegaConf.create({"_target_": target})
    trials = search(node, 8, Trace(str(trace), slope=0.0), network, 10, 0)
    cls = type(instantiate_checked(node, n=8))
    assert sorted(map(str, (t.params for t in trials))) == sorted(
        map(str, cls.search_grid(8, "partial"))
    )
    assert len(trials) >= 4 and all(0 < t.result.summary()["coverage_mean"] <= 1 for t in trials)
