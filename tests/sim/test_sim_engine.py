"""The simulation engine: trace replay reproduces the trace, results are deterministic."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gclab.coding.cce import CCECR
from gclab.coding.classic import ClassicCR
from gclab.coding.m_sgc import MSGC
from gclab.coding.pipelined import PipelinedCR
from gclab.coding.sr_sgc import SRSGC
from gclab.coding.uncoded import Uncoded
from gclab.errors import ConfigError
from gclab.network import NetworkConfig
from gclab.network.base import DelayModel
from gclab.network.bernoulli import Bernoulli
from gclab.network.composite import Composite
from gclab.network.straggler import Straggler
from gclab.network.trace import Trace
from gclab.sim.__main__ import prepare
from gclab.sim.engine import PAYLOAD_BYTES, UNIT_TIME, simulate, unit_time
from helpers.config import compose_config

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"


def tiny_trace(tmp_path: Path, workers: int = 6, rounds: int = 5, load: float = 0.0) -> Path:
    durations = np.random.default_rng(1).uniform(1.0, 3.0, size=(workers, rounds))
    path = tmp_path / "tiny.npz"
    np.savez(path, durations=durations, load=load)
    return path


@pytest.mark.parametrize("policy", ["all", "deadline"])
def test_uncoded_replay_of_a_tiny_trace_is_the_column_maximum(tmp_path: Path, policy: str) -> None:
    path = tiny_trace(tmp_path)
    durations = np.load(path)["durations"]
    result = simulate(Uncoded(6), Trace(str(path), slope=2.0), NetworkConfig(policy=policy), 12, 0)
    scaled = durations.max(axis=0) + (1 / 6) * 2.0  # L = 1/6 for uncoded, base_load 0
    np.testing.assert_allclose(result.durations, np.tile(scaled, 3)[:12])  # wrapped rounds
    assert result.total_time == pytest.approx(result.durations.sum())
    assert result.retransmissions.sum() == 0 and result.lost.sum() == 0
    if policy == "all":
        assert result.waits == 0 and result.late.sum() == 0
    else:  # the μ-rule closes at 2·fastest; uncoded then waits for every later packet
        shift = 2.0 / 6
        late = durations.max(axis=0) + shift > 2 * (durations.min(axis=0) + shift)
        np.testing.assert_array_equal(result.waited, np.tile(late, 3)[:12])


def lambda_shaped_trace(tmp_path: Path, rounds: int = 20) -> Path:
    """A trace in the shared Lambda files' format: 256 workers, seconds, recording metadata."""
    rng = np.random.default_rng(4)
    stragglers = 20.0 * (rng.random((256, rounds)) < 0.01)
    durations = 1.0 + rng.exponential(0.3, (256, rounds)) + stragglers
    path = tmp_path / "lambda-test-cnn-w256-r20-load000.npz"
    np.savez(path, durations=durations, load=0.0, batch=256, region="test", model="cnn")
    return path


def test_uncoded_replay_of_a_lambda_shaped_trace(tmp_path: Path) -> None:
    check_uncoded_replay(lambda_shaped_trace(tmp_path))


@pytest.mark.slow
@pytest.mark.no_ray
@pytest.mark.shared
@pytest.mark.parametrize("name", ["sydney-cnn-w256-r20", "tokyo-cnn-w256-r10"])
def test_uncoded_replay_of_the_shared_traces(name: str) -> None:
    path = TRACES / f"lambda-{name}-load000.npz"
    if not path.is_file():
        pytest.skip(f"shared trace {path} is absent")
    check_uncoded_replay(path)


def check_uncoded_replay(path: Path) -> None:
    """Uncoded, policy all: every round is its slowest worker plus L·slope; no wrap-around."""
    durations = np.load(path, allow_pickle=False)["durations"]
    rounds = durations.shape[1]
    trace = Trace(str(path), slope=2.2, beyond="error")
    result = simulate(Uncoded(256), trace, NetworkConfig(policy="all"), rounds, seed=0)
    np.testing.assert_allclose(result.durations, durations.max(axis=0) + 2.2 / 256)
    with pytest.raises(ConfigError, match=r"or beyond=wrap\.$"):
        simulate(Uncoded(256), trace, NetworkConfig(policy="all"), rounds + 1, seed=0)


def test_same_seed_same_result_other_seed_other_result() -> None:
    model = Composite(Straggler(shift=0.1, mean=0.5), Bernoulli(0.1))
    runs = [simulate(Uncoded(16), model, NetworkConfig(), 200, seed) for seed in (3, 3, 4)]
    a, b, c = (r.summary() for r in runs)
    assert a == b and a != c
    np.testing.assert_array_equal(runs[0].durations, runs[1].durations)


def test_unit_time_adds_load_proportional_compute() -> None:
    base = simulate(Uncoded(4), DelayModel(), NetworkConfig(policy="all"), 10, 0)
    slower = simulate(Uncoded(4), DelayModel(), NetworkConfig(policy="all"), 10, 0, unit_time=8.0)
    assert base.total_time == 0 and slower.total_time == pytest.approx(10 * 8.0 / 4)


def test_summary_and_rounds_file(tmp_path: Path) -> None:
    result = simulate(Uncoded(8), Bernoulli(0.2), NetworkConfig(policy="all", rto=0.5), 30, 0)
    summary = result.summary()
    assert summary["jobs"] == summary["rounds"] == 30 and summary["load"] == 1 / 8
    assert summary["retransmissions"] >= summary["lost"] > 0 and summary["erasures"] == 0
    result.write_rounds(tmp_path / "rounds.csv")
    lines = (tmp_path / "rounds.csv").read_text().splitlines()
    assert lines[0] == (
        "round,duration,erasures,lost,late,retransmissions,waited,server_time,bytes,coverage"
    )
    assert len(lines) == 31
    assert float(lines[1].split(",")[1]) == result.durations[0]
    # every packet and every retransmission carries the small CNN's gradient
    assert summary["bytes_sent"] == (30 * 8 + summary["retransmissions"]) * PAYLOAD_BYTES
    assert sum(float(line.split(",")[-2]) for line in lines[1:]) == summary["bytes_sent"]
    assert summary["server_time_total"] == 0
    assert summary["coverage_mean"] == 1 and all(line.endswith(",1.0") for line in lines[1:])


def compute_of(delay: str, tmp_path: Path, configured: float | None = None) -> float:
    """:func:`unit_time` of a run with the delay model ``delay`` (``a+b``: a composite)."""
    trace = Trace(str(tiny_trace(tmp_path)))
    models = {
        "none": DelayModel(), "bernoulli": Bernoulli(0.1), "straggler": Straggler(),
        "trace": trace, "trace+bernoulli": Composite(trace, Bernoulli(0.1)),
        "straggler+bernoulli": Composite(Straggler(), Bernoulli(0.1)),
    }  # fmt: skip
    return unit_time(configured, models[delay])


@pytest.mark.parametrize(
    ("delay", "expected"),
    [("none", UNIT_TIME), ("bernoulli", UNIT_TIME), ("straggler", UNIT_TIME), ("trace", 0.0),
     ("trace+bernoulli", 0.0), ("straggler+bernoulli", UNIT_TIME)],
)  # fmt: skip
def test_a_run_without_compute_of_its_own_gets_the_default_and_a_trace_none(
    tmp_path: Path, delay: str, expected: float
) -> None:
    """A trace's durations are the compute time: adding the default would count it twice;
    a straggler's are time on top of it (gclab/network/straggler.py)."""
    assert compute_of(delay, tmp_path) == expected
    assert compute_of(delay, tmp_path, 0.5) == 0.5 and compute_of(delay, tmp_path, 0.0) == 0.0


def test_the_default_simulator_config_times_compute(tmp_path: Path) -> None:
    """The issue's command: it timed 0.00 s with no compute model."""
    cfg = compose_config(
        ["scheme=classic_fr", "scheme.s=1", "cluster.workers=16", "sim.jobs=100"], name="sim"
    )
    scheme, delay, network, _ = prepare(cfg)
    compute = unit_time(cfg.sim.unit_time, delay)
    result = simulate(scheme, delay, network, cfg.sim.jobs, cfg.seed, compute)
    assert compute == UNIT_TIME and result.total_time == pytest.approx(100 * UNIT_TIME * 2 / 16)


@pytest.mark.parametrize(
    ("jobs", "unit_time", "message"),
    [(0, 0.0, r"sim\.jobs=0"), (2.5, 0.0, r"sim\.jobs=2\.5"), (3, -1.0, r"sim\.unit_time=-1\.0")],
)
def test_bad_run_options(jobs: object, unit_time: float, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        simulate(Uncoded(4), DelayModel(), NetworkConfig(), jobs, 0, unit_time)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ClassicCR(256, 40),
        lambda: CCECR(256, 40, 2),
        lambda: SRSGC(256, 1, 2, 40),
        lambda: MSGC(256, 1, 2, 40),
    ],
    ids=["classic_cr", "cce_cr", "sr_sgc", "m_sgc"],
)
def test_simulating_never_builds_a_cyclic_code(make) -> None:
    """Exact predicates decide symbolic rounds: no node search, no weights at n = 256."""
    scheme = make()
    delay = Composite(Straggler(shift=1.0, mean=0.5), Bernoulli(p=0.05))
    result = simulate(scheme, delay, NetworkConfig(), jobs=20, seed=0)
    assert result.total_time > 0
    code_holder = getattr(scheme, "gc", scheme)
    assert "encoding" not in vars(code_holder)
    assert "code" not in vars(code_holder.construction)  # the strategy builds it on first use


def test_a_run_ends_when_its_last_job_is_decoded() -> None:
    """No drain round after the last decode: every pipelined job decodes in its own round."""
    result = simulate(PipelinedCR(4, 1, 2), DelayModel(), NetworkConfig(), jobs=5, seed=0)
    assert result.index.tolist() == [0, 1, 2, 3, 4] and len(result.durations) == 5


@pytest.mark.parametrize("recovery", ["decodable", "wait_all"])
def test_an_idle_round_between_drain_rounds_is_skipped(tmp_path: Path, recovery: str) -> None:
    """SR-SGC B=2, 4 jobs: job 2 decodes on time, job 3 (two stragglers, s=1) needs one
    repeat in round 5; round 4 would only compute the job that does not exist."""
    durations = np.ones((4, 6))
    durations[2:, 3] = 5.0
    np.savez(tmp_path / "t.npz", durations=durations, load=0.0)
    delay = Trace(str(tmp_path / "t.npz"), slope=0.0)
    result = simulate(SRSGC(4, 2, 3, 2), delay, NetworkConfig(recovery=recovery), 4, seed=0)
    assert result.index.tolist() == [0, 1, 2, 3, 5]
    assert result.durations.tolist() == [1.0, 1.0, 1.0, 2.0, 1.0]  # all in at 1; round 3 at 2·1
    assert result.erasures.tolist() == [0, 0, 0, 2, 0]


def test_wait_all_runs_every_round_of_m_sgc_as_the_papers_code() -> None:
    """M-SGC with λ = n has no D2 groups: job t decodes in round t and round J is idle.
    The decodable rule skips it; the papers' MultiplexedSGC.run charges all J + T."""
    scheme = MSGC(4, 1, 2, 4)
    runs = {
        recovery: simulate(scheme, DelayModel(), NetworkConfig(recovery=recovery), 3, seed=0)
        for recovery in ("decodable", "wait_all")
    }
    assert runs["decodable"].index.tolist() == [0, 1, 2]
    assert runs["wait_all"].index.tolist() == [0, 1, 2, 3]
