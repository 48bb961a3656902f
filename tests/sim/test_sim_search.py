"""Parameter search: grids, ranking by simulated time, and bad requests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from gclab import CONF_DIR
from gclab.coding.contract import SCHEMES
from gclab.coding.linear import LinearScheme
from gclab.errors import ConfigError
from gclab.network import NetworkConfig
from gclab.network.trace import Trace
from gclab.sim.engine import simulate
from gclab.sim.search import grid, search


class Replication(LinearScheme):
    """Fractional repetition with groups of s+1 (needs (s+1) | n), local to these tests."""

    name = "test_replication"

    def __init__(self, n: int, s: int = 1) -> None:
        groups = np.arange(n) // (s + 1)
        self._init_linear(n, s, (groups[:, None] == groups[None, :]).astype(float))


def grid_of(name: str, n: int, recovery: str) -> list[dict]:
    return SCHEMES[name].search_grid(n, recovery)


def test_grids_of_the_gc_family() -> None:
    assert grid_of("uncoded", 256, "decodable") == [{}]
    assert [p["s"] for p in grid_of("classic_fr", 16, "decodable")] == [1, 3, 7, 15]
    assert [p["s"] for p in grid_of("classic_cr", 5, "wait_all")] == [1, 2, 3, 4]
    assert grid_of("ignore_stragglers", 5, "decodable") == SCHEMES["classic_cr"].search_grid(
        5, "decodable"
    )


def test_grids_of_the_sgc_schemes_are_the_papers() -> None:
    """SR-SGC: B <= 4, W in {B+1, 2B+1, ...} <= 5, every λ (one per (B, s) when only
    (B, s) matters); M-SGC: W − 1 + B <= 4, every λ. 3329 settings in the papers' search
    at n = 256 with s = 1..n for GC; gclab's GC stops at s = n − 1."""
    wait_all = grid_of("sr_sgc", 256, "wait_all")
    assert len(wait_all) == 8 * 256
    assert sorted({(p["B"], p["W"]) for p in wait_all}) == [
        (1, 2), (1, 3), (1, 4), (1, 5), (2, 3), (2, 5), (3, 4), (4, 5),
    ]  # fmt: skip
    decodable = grid_of("sr_sgc", 256, "decodable")
    assert len(decodable) == 4 * 128 and set(map(str, decodable)) <= set(map(str, wait_all))
    assert len(grid_of("m_sgc", 256, "wait_all")) == 4 * 256
    total = sum(len(grid_of(name, 256, "wait_all")) for name in ("uncoded", "classic_cr", "m_sgc"))
    assert total + len(wait_all) == 3329 - 1


def test_search_ranks_every_setting_on_the_same_delays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Replication, "search_grid", SCHEMES["classic_fr"].search_grid)
    rng = np.random.default_rng(0)
    durations = rng.exponential(1.0, size=(8, 20)) + 1.0
    np.savez(tmp_path / "t.npz", durations=durations, load=0.0)
    trace = Trace(str(tmp_path / "t.npz"), slope=1.0)
    cfg = OmegaConf.create({"_target_": f"{__name__}.Replication"})
    trials = search(cfg, 8, trace, NetworkConfig(mu=1.0), 20, seed=0)
    assert [t.params["s"] for t in sorted(trials, key=lambda t: t.params["s"])] == [1, 3, 7]
    times = [t.result.total_time for t in trials]
    assert times == sorted(times)
    best = trials[0]
    again = simulate(Replication(8, **best.params), trace, NetworkConfig(mu=1.0), 20, 0)
    assert again.summary() == best.result.summary()
    assert best.record()["params"] == best.params and "total_time" in best.record()


def test_search_refuses_a_scheme_without_a_grid() -> None:
    cfg = OmegaConf.create({"_target_": f"{__name__}.Replication"})
    with pytest.raises(ConfigError, match="no parameter grid for scheme 'test_replication'"):
        grid(cfg, 8)


def test_search_over_classic_fr() -> None:
    from hydra import compose, initialize_config_dir

    import gclab.sim.config  # noqa: F401  (registers the simulator's schema)
    from gclab.network.straggler import Straggler

    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("sim", overrides=["scheme=classic_fr", "cluster.workers=8"])
    trials = search(cfg.scheme, 8, Straggler(shift=1.0, mean=1.0), NetworkConfig(), 30, seed=0)
    assert sorted(t.params["s"] for t in trials) == [1, 3, 7]
