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
    memories: list[int] | None = None,
) -> tuple[AdaptiveResult, Controller]:
    delay = Trace(str(trace), slope=0.5, base_load=0.0)
    network = NetworkConfig(recovery=recovery)
    policy = Search(every, window, names, memories=memories or Search().memories)
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
        "setting": controller.switches[0].scheme, "memory": controller.switches[0].memory,
    }  # fmt: skip
    assert controller.switches[0].memory in controller.policy.memories
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


def outcome_of(arrival: list[float], start: float = 10.0, **changes) -> RoundOutcome:
    """A round of 3 workers (compute 0.25 s) that started at ``start``."""
    late = np.array(arrival) > 2.5
    return RoundOutcome(**{
        "round": 0, "start": start, "duration": 2.5, "close": 2.5, "compute": np.full(3, 0.25),
        "arrival": np.array(arrival), "lost": np.zeros(3, dtype=bool), "late": late,
        "erased": late, "recovered": (), "retransmissions": 0, "waited": False,
        "decodable": (0,), "server_time": 0.1, **changes,
    })  # fmt: skip


def test_a_packet_in_flight_at_the_decision_counts_as_a_window_later_than_that() -> None:
    window = Window(2)
    protocol = RoundProtocol(NetworkConfig(latency=0.5), DelayModel(), 3, 0)
    window.add(outcome_of([1.5, 2.5, 30.5]), protocol, load=0.5, size=0.0)
    model = window.model(now=15.0, slope=0.0)  # 5 s after the round started: the window's span
    # delays: arrival − latency − compute; the late one took at least 5 − 0.75, then 5 more
    assert model.delay[:, 0] == pytest.approx([0.75, 1.75, 9.25])
    assert model.delays(0, 3, 0, 1.0) == pytest.approx([1.25, 2.25, 9.75])  # compute doubles
    assert window.model(now=50.0, slope=0.0).delay[2, 0] == pytest.approx(29.75)  # arrived
    lost = outcome_of([1.5, 2.5, 30.5], lost=np.array([False, True, False]))
    window.add(lost, protocol, load=0.5, size=0.0)
    assert window.model(now=100.0, slope=0.0).delay[1, 1] == pytest.approx(15.25)  # the median


def test_a_delay_observed_as_zero_stays_zero_at_other_loads() -> None:
    """A trace's delay clipped at 0 hides how far below 0 it was: other loads shift the
    delays seen above 0 by the slope and leave those at 0 where they are."""
    window = Window(1)
    protocol = RoundProtocol(NetworkConfig(), DelayModel(), 3, 0)
    window.add(outcome_of([0.0, 1.0, 2.0], compute=np.zeros(3)), protocol, load=0.5, size=0.0)
    model = window.model(now=20.0, slope=2.0)
    for load in (0.25, 1.0):
        expected = [0.0, max(1.0 + 2.0 * (load - 0.5), 0.0), 2.0 + 2.0 * (load - 0.5)]
        assert model.delays(0, 3, 0, load) == pytest.approx(expected)
        assert model.delays_by_load(1, 3, 0, np.array([load]))[0, 0] == pytest.approx(expected)


def test_a_round_that_waited_makes_the_next_boundary_a_decision(tmp_path: Path) -> None:
    policy = Search(every=5, window=2, schemes=["classic_cr"])
    nodes = candidates(policy, DictConfig({}), 3)
    scheme = instantiate_checked(nodes["classic_cr"], n=3, s=1)
    delay = Trace(str(regime_trace(tmp_path / "t.npz")), slope=0.5)
    controller = Controller(policy, nodes, scheme, delay, NetworkConfig(), 0, 1.0)
    protocol = RoundProtocol(NetworkConfig(), delay, 3, 0)
    controller.observe(outcome_of([1.5, 2.5, 3.0]), protocol, scheme)
    assert not controller.due(1)  # the window is not full yet
    controller.observe(outcome_of([1.5, 2.5, 3.0]), protocol, scheme)
    assert not controller.due(2) and controller.due(5)  # every 5th boundary
    controller.observe(outcome_of([1.5, 2.5, 3.0], waited=True), protocol, scheme)
    assert controller.due(3)  # news


def test_more_redundancy_is_taken_at_once_and_less_only_beyond_the_margin(
    tmp_path: Path,
) -> None:
    """The trusted memory's pick replaces the current setting at once when it is more
    redundant (it is within the slack of the fastest by construction), and only when it
    is faster by more than the margin when it is less redundant."""
    policy = Search(window=2, schemes=["classic_cr"], slack=0.03, margin=0.02)
    nodes = candidates(policy, DictConfig({}), 3)
    scheme = instantiate_checked(nodes["classic_cr"], n=3, s=1)
    delay = Trace(str(regime_trace(tmp_path / "t.npz")), slope=0.5)
    controller = Controller(policy, nodes, scheme, delay, NetworkConfig(), 0, 1.0)
    low, high = (controller.memories.column(f"s={s}", load) for s, load in ((1, 2 / 3), (2, 1)))
    switch = controller._switch  # (scores by column, the pick, the current setting)
    assert switch(np.array([100.0, 102.9]), high, low)  # up, 2.9 % slower: taken
    assert not switch(np.array([100.0, 99.0]), low, high)  # down, 1 % slower: kept
    assert not switch(np.array([98.1, 100.0]), low, high)  # down, 1.9 % faster: kept
    assert switch(np.array([97.9, 100.0]), low, high)  # down, 2.1 % faster: taken


def test_a_memory_longer_than_the_window_keeps_redundancy_between_rare_tails(
    tmp_path: Path,
) -> None:
    """Three workers take 20 s every sixth round. A controller that remembers only its
    4-round window drops to s = 1 whenever the window has no tail and waits at the next;
    with memories reaching back past the last tail it keeps s >= 3 once it has seen them."""
    durations = np.ones((N, JOBS + 8))
    for r in range(5, durations.shape[1], 6):
        durations[[r % N, (r + 3) % N, (r + 5) % N], r] = 20.0
    np.savez(tmp_path / "t.npz", durations=durations, load=np.float64(0.0))
    totals, waits = {}, {}
    for memories in ([4], [4, 12, 24]):
        result, controller = run(
            tmp_path / "t.npz", ["classic_cr"], {"name": "classic_cr", "s": 1}, "wait_all",
            every=1, window=4, memories=memories,
        )  # fmt: skip
        totals[len(memories)], waits[len(memories)] = result.total_time, result.waits
        if len(memories) > 1:
            assert all(s.params["s"] >= 3 for s in controller.switches[-1:])
            assert not result.waited[result.index >= 24].any()
    assert waits[3] < waits[1] and totals[3] < totals[1]


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
