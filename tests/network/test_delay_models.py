"""Delay/loss models: statistics over many rounds, determinism, configs and bad inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import InstantiationException
from hydra.utils import instantiate

import gclab.schemas  # noqa: F401  (registers the delay schemas)
from gclab import CONF_DIR
from gclab.errors import ConfigError
from gclab.network.base import DelayModel
from gclab.network.bernoulli import Bernoulli
from gclab.network.composite import Composite
from gclab.network.gilbert_elliott import GilbertElliott
from gclab.network.straggler import Straggler
from gclab.network.trace import Trace

N, ROUNDS = 64, 3000


def losses(model: DelayModel, seed: int = 0, n: int = N, rounds: int = ROUNDS) -> np.ndarray:
    return np.array([model.lost(r, n, seed) for r in range(rounds)])  # [rounds, n]


def mean_burst(lost: np.ndarray) -> float:
    """Mean length of runs of consecutive losses, per worker (columns), pooled."""
    padded = np.zeros((lost.shape[0] + 2, lost.shape[1]), dtype=np.int8)
    padded[1:-1] = lost
    edges = np.diff(padded, axis=0)
    return lost.sum() / np.count_nonzero(edges == 1)


def test_bernoulli_loss_rate_and_independence() -> None:
    lost = losses(Bernoulli(0.2))
    assert lost.mean() == pytest.approx(0.2, abs=0.005)
    assert mean_burst(lost) == pytest.approx(1 / 0.8, rel=0.03)  # geometric runs
    retry = Bernoulli(0.2).relost(5, 4, 2000, N, seed=0)
    assert retry.mean() == pytest.approx(0.2, abs=0.005)


@pytest.mark.parametrize(("rate", "burst"), [(0.1, 4.0), (0.3, 2.0), (0.05, 1.0)])
def test_gilbert_rate_form_matches_loss_rate_and_burst_length(rate: float, burst: float) -> None:
    model = GilbertElliott(loss_rate=rate, burst_length=burst)
    lost = losses(model)
    assert lost.mean() == pytest.approx(rate, rel=0.06)
    assert mean_burst(lost) == pytest.approx(burst, rel=0.06)


def test_gilbert_chain_form_matches_its_stationary_loss_rate() -> None:
    model = GilbertElliott(p_good_bad=0.05, p_bad_good=0.2, loss_good=0.02, loss_bad=0.6)
    expected = 0.2 * 0.6 + 0.8 * 0.02
    assert model.loss_rate == pytest.approx(expected)
    bad = np.array([model.bad(r, N, 0) for r in range(ROUNDS)])
    assert bad.mean() == pytest.approx(0.2, rel=0.06)
    assert mean_burst(bad) == pytest.approx(1 / 0.2, rel=0.06)  # mean sojourn in the bad state
    assert losses(model).mean() == pytest.approx(expected, rel=0.06)


def test_gilbert_retransmissions_follow_the_chain_from_the_rounds_state() -> None:
    model = GilbertElliott(loss_rate=0.5, burst_length=10.0)
    bad = model.bad(7, 4000, seed=1)
    retry = model.relost(7, 7, 1, 4000, seed=1)[0]
    # one step from bad stays bad w.p. 0.9 (lost); from good goes bad w.p. 0.1
    assert retry[bad].mean() == pytest.approx(0.9, abs=0.03)
    assert retry[~bad].mean() == pytest.approx(0.1, abs=0.03)


def test_straggler_shifted_exponential_and_slow_workers() -> None:
    model = Straggler(shift=0.5, mean=2.0, slow_workers=4, slow_factor=3.0)
    delays = np.array([model.delays(r, N, 0, load=0.1) for r in range(ROUNDS)])
    slow = model.slow(N, 0)
    assert slow.sum() == 4
    assert delays.min() >= 0.5
    assert delays[:, ~slow].mean() == pytest.approx(2.5, rel=0.02)
    assert delays[:, ~slow].std() == pytest.approx(2.0, rel=0.03)
    assert delays[:, slow].mean() == pytest.approx(3 * 2.5, rel=0.05)
    assert not losses(model, rounds=10).any()


def test_composite_adds_delays_and_combines_losses_independently() -> None:
    model = Composite(Straggler(shift=1.0, mean=0.0), Composite(Bernoulli(0.2), Bernoulli(0.2)))
    assert model.delays(3, N, 0, 0.5) == pytest.approx(np.ones(N))
    assert losses(model).mean() == pytest.approx(1 - 0.8 * 0.8, abs=0.01)
    assert model.relost(0, 0, 2000, N, 0).mean() == pytest.approx(0.36, abs=0.01)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Bernoulli(0.3),
        lambda: GilbertElliott(loss_rate=0.2, burst_length=3.0),
        lambda: Straggler(shift=0.0, mean=1.0, slow_workers=2),
    ],
    ids=["bernoulli", "gilbert_elliott", "straggler"],
)
def test_draws_depend_only_on_seed_and_round(make: object) -> None:
    model = make()
    forward = [(model.delays(r, N, 3, 0.1), model.lost(r, N, 3)) for r in range(600)]
    fresh = make()
    for r in reversed(range(600)):  # asked in another order, by another instance
        np.testing.assert_array_equal(fresh.delays(r, N, 3, 0.1), forward[r][0])
        np.testing.assert_array_equal(fresh.lost(r, N, 3), forward[r][1])
    other_seed = np.array([model.delays(r, N, 4, 0.1) + model.lost(r, N, 4) for r in range(600)])
    assert not np.array_equal(other_seed, np.array([d + x for d, x in forward]))
    np.testing.assert_array_equal(
        model.relost(2, 1, 5, N, 3), model.relost(2, 1, 50, N, 3)[:5]
    )  # prefix-stable in the number of attempts


def write_trace(path: Path, durations: object, **extra: object) -> Path:
    np.savez(path, durations=durations, **extra)
    return path


def test_trace_replays_and_scales_by_load(tmp_path: Path) -> None:
    durations = np.arange(12, dtype=float).reshape(3, 4)
    path = write_trace(tmp_path / "t.npz", durations, load=0.25)
    model = Trace(str(path), slope=2.0)
    assert model.base_load == 0.25
    np.testing.assert_allclose(model.delays(1, 3, 0, load=0.75), durations[:, 1] + 1.0)
    # wrap: round 5 is column 1, worker 4 is row 1
    np.testing.assert_allclose(model.delays(5, 5, 0, load=0.25), durations[[0, 1, 2, 0, 1], 1])
    # scaled below zero: clipped
    assert Trace(str(path), slope=100.0).delays(0, 3, 0, load=0.0)[0] == 0.0


def test_trace_error_rule_refuses_larger_runs(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.npz", np.ones((3, 4)), load=0.0)
    model = Trace(str(path), beyond="error")
    model.check(3, 4)
    with pytest.raises(ConfigError, match=r"beyond=error but trace t\.npz has 3 .* needs 3 × 5"):
        model.check(3, 5)
    with pytest.raises(ConfigError, match=r"or beyond=wrap\.$"):
        model.delays(0, 4, 0, 0.0)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Bernoulli(-0.1), r"^p=-0.1 is invalid: it must be a probability in \[0, 1\]"),
        (lambda: Bernoulli(1.5), r"^p=1.5 is invalid"),
        (lambda: Bernoulli("x"), r"^p='x' is invalid: it must be a finite number"),
        (lambda: GilbertElliott(), "^p_good_bad and p_bad_good, or loss_rate and burst_length:"),
        (
            lambda: GilbertElliott(p_good_bad=0.1, p_bad_good=0.2, loss_rate=0.1, burst_length=2),
            "not both",
        ),
        (lambda: GilbertElliott(p_good_bad=0.1), "^p_bad_good is missing"),
        (lambda: GilbertElliott(p_good_bad=0.1, p_bad_good=0.0), r"p_bad_good=0.0 .* \(0, 1\]"),
        (lambda: GilbertElliott(p_good_bad=1.2, p_bad_good=0.5), "^p_good_bad=1.2"),
        (lambda: GilbertElliott(loss_rate=0.1), "^burst_length is missing"),
        (lambda: GilbertElliott(loss_rate=0.9, burst_length=2.0), "loss_rate=0.9 is impossible"),
        (lambda: GilbertElliott(loss_rate=1.0, burst_length=2.0), r"in \[0, 1\)"),
        (lambda: GilbertElliott(loss_rate=0.1, burst_length=0.5), "burst_length=0.5"),
        (
            lambda: GilbertElliott(loss_rate=0.1, burst_length=2.0, loss_bad=0.5),
            "Gilbert channel",
        ),
        (lambda: Straggler(shift=-1.0, mean=1.0), "^shift=-1.0 is invalid"),
        (lambda: Straggler(shift=0.0, mean=1.0, slow_workers=-2), "slow_workers=-2"),
        (lambda: Straggler(shift=0.0, mean=1.0, slow_workers=1.5), "slow_workers=1.5"),
        (lambda: Straggler(shift=0.0, mean=1.0, slow_factor=0.5), "slow_factor=0.5"),
        (lambda: Composite(Bernoulli(0.1), "x"), "^loss='x' is invalid"),
    ],
)
def test_bad_model_parameters(build: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build()


def test_straggler_with_more_slow_workers_than_workers() -> None:
    with pytest.raises(ConfigError, match="slow_workers=5 is invalid: the run has only 4"):
        Straggler(shift=0.0, mean=1.0, slow_workers=5).check(4, 10)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "is not a file"),
        (b"not a zip", "is not a readable .npz"),
        ({"times": np.ones((2, 2))}, r"has keys \['times'\] but needs 'durations'"),
        ({"durations": np.ones(4)}, r"has shape \(4,\)"),
        ({"durations": np.ones((0, 3))}, r"has shape \(0, 3\)"),
        ({"durations": np.array([["a", "b"]])}, "dtype <U1"),
        ({"durations": np.array([[1.0, np.nan]])}, "must be finite and >= 0"),
        ({"durations": np.array([[1.0, -0.5]])}, "must be finite and >= 0"),
        ({"durations": np.ones((2, 2)), "load": np.ones(2)}, "'load' must be a finite number"),
        ({"durations": np.ones((2, 2))}, "has no 'load' entry"),
        ({"durations": np.array([[1.0]], dtype=object)}, "is not a readable .npz"),
    ],
)
def test_bad_traces(tmp_path: Path, content: object, message: str) -> None:
    path = tmp_path / "bad.npz"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, dict):
        np.savez(path, **content)
    with pytest.raises(ConfigError, match=message):
        Trace(str(path))


def test_trace_needs_a_path_and_a_known_rule(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^path is missing"):
        Trace(None)
    path = write_trace(tmp_path / "t.npz", np.ones((2, 2)), load=0.0)
    with pytest.raises(ValueError, match="'loop' is not a valid Beyond"):  # the config: at compose
        Trace(str(path), beyond="loop")


def compose_delay(*overrides: str) -> DelayModel:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose(overrides=list(overrides))
    return instantiate(cfg.delay)


def test_every_delay_option_composes_and_builds(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.npz", np.ones((2, 2)), load=0.0)
    assert type(compose_delay("+delay=none")) is DelayModel
    model = compose_delay("+delay=bernoulli", "delay.p=0.1")
    assert isinstance(model, Bernoulli) and model.p == 0.1
    assert compose_delay("+delay=gilbert_elliott", "delay.loss_rate=0.1", "delay.burst_length=3")
    assert isinstance(compose_delay("+delay=straggler", "delay.slow_workers=1"), Straggler)
    assert compose_delay("+delay=trace", f"delay.path={path}").path == path
    both = compose_delay(
        "+delay=composite",
        "delay@delay.compute=trace",
        f"delay.compute.path={path}",
        "delay@delay.loss=gilbert_elliott",
        "delay.loss.p_good_bad=0.1",
        "delay.loss.p_bad_good=0.5",
    )
    assert isinstance(both.parts[0], Trace) and isinstance(both.parts[1], GilbertElliott)


def test_config_errors_reach_the_caller() -> None:
    with pytest.raises(InstantiationException) as info:
        compose_delay("+delay=bernoulli", "delay.p=1.5")
    assert isinstance(info.value.__cause__, ConfigError)
