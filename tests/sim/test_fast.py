"""The fast search computes what the engine computes, setting by setting.

Every setting of the full grids of ``uncoded``, ``classic_cr``, ``sr_sgc``, ``m_sgc``,
``is_cr`` and ``is_hr`` at n = 8 runs through :func:`gclab.sim.search.search` (the fast path) and
through :func:`gclab.sim.engine.simulate` alone: summaries and every per-round array
must be equal, in both recovery modes, on traces with heavy stragglers (recoveries,
waits, retransmissions, skipped rounds) and with ties (integer delays: late packets
that arrive with the retransmissions), under both collection policies, with compute
time and latency added, and with bytes on the links and server time on the clock; with
the kernels interpreted and compiled (:class:`gclab.sim.kernels.Tiered`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from omegaconf import DictConfig

from gclab.network import NetworkConfig
from gclab.network.base import DelayModel
from gclab.network.bernoulli import Bernoulli
from gclab.network.composite import Composite
from gclab.network.gilbert_elliott import TimedGilbertElliott
from gclab.network.straggler import Straggler
from gclab.network.trace import Trace
from gclab.schemas import instantiate_checked
from gclab.sim.engine import SimResult, simulate
from gclab.sim.fast import fast_results
from gclab.sim.kernels import forced
from gclab.sim.search import grid, scheme_option, search

N, JOBS = 8, 12
SCHEMES = ("uncoded", "classic_cr", "sr_sgc", "m_sgc", "is_cr", "is_hr")
ARRAYS = ("index", "durations", "erasures", "lost", "late", "retransmissions", "waited")
ARRAYS += ("server_time", "bytes")
#: A payload whose packets take seconds on the links below (the trace delays are ~1–5 s).
PAYLOAD = 1e6


@pytest.fixture(params=["interpreted", "compiled"])
def tier(request: pytest.FixtureRequest) -> Iterator[None]:
    with forced(request.param):
        yield


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    rng = np.random.default_rng(5)
    heavy = 1.0 + rng.exponential(0.3, (N, 9)) + 4.0 * (rng.random((N, 9)) < 0.25)
    ties = rng.integers(1, 5, (N, 9)).astype(float)  # late packets meet the resends
    folder = tmp_path_factory.mktemp("traces")
    paths = {}
    for name, durations in (("heavy", heavy), ("ties", ties)):
        paths[name] = folder / f"{name}.npz"
        np.savez(paths[name], durations=durations, load=0.0)
    return paths


def assert_same(got: SimResult, want: SimResult) -> None:
    assert got.summary() == want.summary()
    for key in ARRAYS:
        np.testing.assert_array_equal(getattr(got, key), getattr(want, key), err_msg=key)
        assert getattr(got, key).dtype == getattr(want, key).dtype, key


def alone(node: DictConfig, params: dict, delay: DelayModel, network: NetworkConfig, **kw):
    scheme = instantiate_checked(node, n=N, **params)
    return simulate(scheme, delay, network, JOBS, seed=1, **kw)


@pytest.mark.parametrize("recovery", ["decodable", "wait_all"])
@pytest.mark.parametrize("trace", ["heavy", "ties"])
@pytest.mark.parametrize("name", SCHEMES)
def test_search_equals_each_setting_alone(traces, name, trace, recovery, tier) -> None:
    node = scheme_option(name)
    # 12 jobs + T rounds wrap the 9 columns; without a load slope, integer delays tie with
    # the resends (close 2, resends at 2 + rto = 3)
    delay = Trace(str(traces[trace]), slope=3.0 if trace == "heavy" else 0.0)
    network = NetworkConfig(mu=1.0, rto=1.0, recovery=recovery)
    trials = search(node, N, delay, network, JOBS, seed=1)
    assert len(trials) == len(grid(node, N, recovery))
    for trial in trials:
        assert_same(trial.result, alone(node, trial.params, delay, network))
    times = [t.result.total_time for t in trials]
    assert times == sorted(times)


@pytest.mark.parametrize("recovery", ["decodable", "wait_all"])
@pytest.mark.parametrize("name", SCHEMES)
def test_other_delay_models_policies_and_clock_terms(traces, name, recovery, tier) -> None:
    node = scheme_option(name)
    models = [
        Straggler(shift=0.5, mean=1.0, slow_workers=2),  # delays that ignore the load
        Composite(Trace(str(traces["heavy"]), slope=1.0), Straggler(shift=0.0, mean=0.2)),
    ]
    for delay in models:
        for policy in ("deadline", "all"):
            network = NetworkConfig(policy=policy, mu=0.5, latency=0.25, rto=0.7, recovery=recovery)
            settings = grid(node, N, recovery)
            fast = fast_results(name, node, N, settings, delay, network, JOBS, 1, 2.0, PAYLOAD)
            assert fast is not None and len(fast) == len(settings)
            for params, result in zip(settings, fast):
                assert_same(
                    result,
                    alone(node, params, delay, network, unit_time=2.0, payload_bytes=PAYLOAD),
                )


@pytest.mark.parametrize("name", ["sr_sgc", "m_sgc"])
def test_the_tiers_agree_on_bitsets_of_several_words(name) -> None:
    """At n = 130 a set of workers spans three ``uint64`` words (the highest bits too)."""
    node, n = scheme_option(name), 130
    delay = Straggler(shift=0.5, mean=1.0, slow_workers=40)
    network = NetworkConfig(mu=0.2, rto=0.7, recovery="wait_all")
    settings = grid(node, n, "wait_all")[::97]
    assert len(settings) >= 5
    args = (delay, network, JOBS, 1, 0.5, PAYLOAD)
    with forced("interpreted"):
        interpreted = fast_results(name, node, n, settings, *args)
    with forced("compiled"):
        compiled = fast_results(name, node, n, settings, *args)
    assert interpreted is not None and compiled is not None
    for got, want in zip(interpreted, compiled):
        assert_same(got, want)
    assert any(r.waited.any() for r in compiled)  # the straggler marks mattered


def test_the_fast_path_steps_aside_where_it_does_not_model_the_run(traces) -> None:
    network = NetworkConfig()
    lossy = Composite(Trace(str(traces["heavy"]), slope=1.0), Bernoulli(0.1))
    sr = scheme_option("sr_sgc")
    assert fast_results("sr_sgc", sr, N, grid(sr, N), lossy, network, JOBS, 1, 0.0, 0.0) is None
    tandon = scheme_option("classic_cr")
    tandon.construction = "tandon"
    plain = Trace(str(traces["heavy"]), slope=1.0)
    assert (
        fast_results("classic_cr", tandon, N, [{"s": 1}], plain, network, JOBS, 1, 0.0, 0.0) is None
    )
    fr = scheme_option("classic_fr")
    assert fast_results("classic_fr", fr, N, grid(fr, N), plain, network, JOBS, 1, 0.0, 0.0) is None
    timed = TimedGilbertElliott(loss_rate=0.0, burst_seconds=1.0)  # loses by sending time
    assert fast_results("sr_sgc", sr, N, grid(sr, N), timed, network, JOBS, 1, 0.0, 0.0) is None
    # and the search still answers, through the engine
    trials = search(sr, N, lossy, network, JOBS, seed=1)
    best = trials[0]
    assert_same(best.result, alone(sr, best.params, lossy, network))


LINKS = {
    "uplink": {"bandwidth": 4e5},
    "server": {"server_bandwidth": 2e6, "server_time": 0.125},
    "all": {"bandwidth": 1e6, "server_bandwidth": 3e6, "broadcast_bandwidth": 8e6},
}


@pytest.mark.parametrize("links", list(LINKS))
@pytest.mark.parametrize("recovery", ["decodable", "wait_all"])
@pytest.mark.parametrize("name", SCHEMES)
def test_bytes_and_server_time(traces, name, recovery, links, tier) -> None:
    """Every setting equals simulating it alone with the links limited and server time on."""
    node = scheme_option(name)
    delay = Trace(str(traces["heavy"]), slope=3.0)
    network = NetworkConfig(mu=0.5, rto=0.7, recovery=recovery, **LINKS[links])
    settings = grid(node, N, recovery)
    fast = fast_results(name, node, N, settings, delay, network, JOBS, 1, 0.5, PAYLOAD)
    assert fast is not None and len(fast) == len(settings)
    for params, result in zip(settings, fast):
        assert_same(
            result, alone(node, params, delay, network, unit_time=0.5, payload_bytes=PAYLOAD)
        )
    assert all(r.bytes.sum() > 0 for r in fast)
