"""The adaptive simulator: causality, segments, switches, both recovery modes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import DictConfig

from gclab.adapt.decide import Controller, candidates
from gclab.adapt.observe import Window
from gclab.adapt.options import Search
from gclab.adapt.simulate import AdaptiveResult, simulate_adaptive
from gclab.network import DelayModel, NetworkConfig, RoundOutcome, RoundProtocol
from gclab.network.trace import Trace
from gclab.schemas import instantiate_checked
from gclab.sim.engine import simulate
from gclab.sim.search import scheme_option

N, JOBS, CHANGE = 8, 24, 12


def regime_trace(path: Path, later: float = 20.0, from_round: int = CHANGE) -> Path:
    """1 s for everyone, then from ``from_round`` three workers (rotating) take ``later`` s."""
    durations = np.ones((N, JOBS + 8))
    for r in range(from_round, durations.shape[1]):
        durations[[r % N, (r + 3) % N, (r + 5) % N], r] = later
    np.savez(path, durations=durations, load=np.float64(0.0))
    return path


def run(
    trace: Path,
    names: list[str],
    start: dict,
    recovery: str = "decodable",
    every: int = 2,
    window: int = 4,
) -> tuple[AdaptiveResult, Controller]:
    delay = Trace(str(trace), slope=0.5, base_load=0.0)
    network = NetworkConfig(recovery=recovery)
    policy = Search(every, window, names)
    nodes = candidates(policy, DictConfig({}), N)
    scheme = instantiate_checked(nodes[start.pop("name")], n=N, **start)
    controller = Controller(policy, nodes, scheme, delay, network, 0, 1.0)
    return simulate_adaptive(scheme, controller, delay, network, JOBS, 0), controller


def test_the_scheme_follows_a_regime_change(tmp_path: Path) -> None:
    result, controller = run(
        regime_trace(tmp_path / "t.npz"), ["classic_cr"], {"name": "classic_cr", "s": 1}
    )
    jobs = [s.job for s in controller.switches]
    assert jobs and min(jobs) > CHANGE  # decided on what the change showed, not before it
    assert controller.switches[-1].params["s"] >= 3  # the three stragglers are tolerated
    assert result.switched.sum() == len(controller.switches)
    assert result.jobs == JOBS and len(result.durations) == JOBS  # T = 0: no drain rounds
    # after the last switch each round is the final scheme's round on the run's own delays
    last = controller.switches[-1]
    final = instantiate_checked(scheme_option("classic_cr"), n=N, **last.params)
    delay = Trace(str(tmp_path / "t.npz"), slope=0.5, base_load=0.0)
    fixed = simulate(final, delay, NetworkConfig(), JOBS, 0)
    after = result.index >= last.job
    assert np.array_equal(result.durations[after], fixed.durations[fixed.index >= last.job])
    summary = result.summary()
    assert summary["switches"][0] == {
        "job": jobs[0], "scheme": "classic_cr", "params": controller.switches[0].params,
        "setting": controller.switches[0].scheme,
    }  # fmt: skip
    assert summary["decisions"] == len(controller.seconds) >= 1
    assert summary["decide_seconds"] == pytest.approx(sum(controller.seconds))


def test_the_decision_at_a_job_depends_only_on_the_rounds_before_it(tmp_path: Path) -> None:
    """Changing every delay from round ``m`` on changes nothing the run did before ``m``."""
    m = CHANGE + 2
    base, base_ctl = run(
        regime_trace(tmp_path / "a.npz"), ["classic_cr"], {"name": "classic_cr", "s": 1}
    )
    future = np.load(tmp_path / "a.npz")["durations"].copy()
    future[:, m:] = np.where(future[:, m:] > 1, 1.0, 7.0)  # everything else straggles now
    np.savez(tmp_path / "b.npz", durations=future, load=np.float64(0.0))
    other, other_ctl = run(tmp_path / "b.npz", ["classic_cr"], {"name": "classic_cr", "s": 1})
    before = base.index < m
    assert np.array_equal(base.index[before], other.index[other.index < m])
    assert np.array_equal(base.durations[before], other.durations[other.index < m])
    early = [s for s in base_ctl.switches if s.job <= m]
    assert early and early == [s for s in other_ctl.switches if s.job <= m]
    assert base.total_time != other.total_time  # the later delays did matter


def test_a_packet_not_arrived_at_the_decision_counts_as_at_least_that_late() -> None:
    window = Window(2)
    protocol = RoundProtocol(NetworkConfig(latency=0.5), DelayModel(), 3, 0)
    arrival = np.array([1.5, 2.5, 30.5])
    outcome = RoundOutcome(
        round=0, start=10.0, duration=2.5, close=2.5, compute=np.full(3, 0.25), arrival=arrival,
        lost=np.array([False, False, False]), late=np.array([False, False, True]),
        erased=np.array([False, False, True]), recovered=(), retransmissions=0, waited=False,
        decodable=(0,), server_time=0.1,
    )  # fmt: skip
    window.add(outcome, protocol, load=0.5, size=0.0)
    model = window.model(now=15.0, slope=0.0)  # 5 s after the round started
    assert model.delay[:, 0] == pytest.approx([0.75, 1.75, 4.25])  # 5 − 0.5 − 0.25 for the late one
    assert model.delays(0, 3, 0, 1.0) == pytest.approx([1.25, 2.25, 4.75])  # compute doubles
    lost = RoundOutcome(**{**vars(outcome), "lost": np.array([False, True, False])})
    window.add(lost, protocol, load=0.5, size=0.0)
    assert window.model(now=100.0, slope=0.0).delay[1, 1] == pytest.approx(15.25)  # the median


def test_one_candidate_with_one_setting_is_the_fixed_run(tmp_path: Path) -> None:
    trace = regime_trace(tmp_path / "t.npz")
    result, controller = run(trace, ["uncoded"], {"name": "uncoded"})
    assert not controller.switches and controller.seconds
    uncoded = instantiate_checked(scheme_option("uncoded"), n=N)
    delay = Trace(str(trace), slope=0.5, base_load=0.0)
    fixed = simulate(uncoded, delay, NetworkConfig(), JOBS, 0)
    same = {k: v for k, v in result.summary().items() if k in fixed.summary()}
    assert same == {**fixed.summary(), "scheme": result.scheme}
    assert np.array_equal(result.durations, fixed.durations)


@pytest.mark.parametrize("recovery", ["decodable", "wait_all"])
def test_switching_out_of_a_pipeline_drains_it_first(tmp_path: Path, recovery: str) -> None:
    result, controller = run(
        regime_trace(tmp_path / "t.npz"), ["sr_sgc", "classic_cr"],
        {"name": "sr_sgc", "B": 2, "W": 3, "lam": 1}, recovery,
    )  # fmt: skip
    assert controller.switches
    first = int(np.flatnonzero(result.switched)[0])
    assert result.index[first] >= controller.switches[0].job  # drain rounds came first
    assert np.all(np.diff(result.index) == 1)  # the run's rounds are consecutive
