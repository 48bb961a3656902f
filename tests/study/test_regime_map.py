"""The regime map: cells built from real runs by replay (exact variants) and re-timing
(stale ones), compared with the baseline's cells, Holm-corrected, and drawn."""

from __future__ import annotations

import math

import numpy as np
import pytest
from omegaconf import OmegaConf

from gclab.app import run
from gclab.report.survival import Outcome
from gclab.study.regime_map import (
    Cell,
    cell_outcome,
    compare_cells,
    crossing_time,
    heat_maps,
    markdown,
    verify_rows,
)
from gclab.study.replay import replay_run
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process

BASE = [*TINY, "cluster.workers=4", "train.rounds=12", "train.eval_every=2",
        "network.policy=all", "network.rto=0.5", "train.target_accuracy=0.05"]  # fmt: skip
LOSSY = ["delay=bernoulli", "delay.p=0.3"]


def train(overrides: list[str], run_dir) -> dict:
    cfg = compose_config(overrides)
    (run_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
    return run(cfg, run_dir, start_pool=in_process)


def test_an_exact_cell_is_the_replay_of_the_lossless_run_at_the_cells_rto(tmp_path):
    exact = [*BASE, "scheme=classic_fr", "scheme.s=1"]
    summary = train(exact, tmp_path / "src")
    speed = summary["partition_seconds"]
    cfg = compose_config([*exact, *LOSSY])
    replayed = replay_run(tmp_path / "src", cfg, tmp_path / "replay", [], {"delay": "bernoulli"})
    cell = cell_outcome(tmp_path / "src", 0.05, 0.5, speed, cfg.delay)
    assert replayed["time_to_target"] is not None and replayed["retransmissions"] > 0
    assert cell.time == pytest.approx(replayed["time_to_target"], rel=1e-12)
    shorter = cell_outcome(tmp_path / "src", 0.05, 0.25, speed, cfg.delay)
    assert shorter.time < cell.time  # a shorter rto: retransmissions cost less
    slower = cell_outcome(tmp_path / "src", 0.05, 0.5, 2 * speed, cfg.delay)
    assert slower.time > cell.time  # twice the compute per partition: a later crossing


def test_a_stale_cell_is_its_run_re_timed_and_has_no_other_loss(tmp_path):
    stale = [*BASE, "scheme=pipelined_cr", "scheme.s=1", "scheme.T=1", *LOSSY]
    summary = train(stale, tmp_path / "run")
    own = cell_outcome(tmp_path / "run", 0.05, 0.5, summary["partition_seconds"])
    assert own.time == pytest.approx(summary["time_to_target"], rel=1e-9)
    assert own.end == pytest.approx(summary["total_virtual_time"], rel=1e-9)
    other = compose_config([*stale[:-2], "delay=bernoulli", "delay.p=0.1"]).delay
    assert cell_outcome(tmp_path / "run", 0.05, 0.5, 0.01, other) is None


def test_a_crossing_needs_every_model_and_decisive_evaluations():
    records = [
        (1.0, {"test_accuracy": 0.5, "model_accuracy": [0.7, 0.3]}),
        (2.0, {"test_accuracy": 0.7, "model_accuracy": [0.7, 0.7], "decisive": False}),
        (3.0, {"test_accuracy": 0.6, "model_accuracy": [0.5, 0.65]}),
    ]
    assert crossing_time(records, 0.6) == 3.0  # model 0 at 1.0, model 1 at 3.0
    assert crossing_time(records, 0.68) is None
    assert crossing_time([(1.0, {"test_accuracy": 0.9})], 0.6) == 1.0


def test_cells_compare_by_seed_with_holm_over_a_variants_map(tmp_path):
    """Scheme x is 2x faster than the baseline in regime (1, a) in every seed (ratio 2,
    no spread: p = 0), 1.0-1.1x in (3, a) (not distinguishable), and misses the target in
    (1, b) where the baseline ends at 50: restricted at the shortest follow-up, 50."""
    cells = []
    for seed in range(4):
        base = {(1.0, "a"): 10.0, (3.0, "a"): 10.0 + seed, (1.0, "b"): 20.0}
        mine = {(1.0, "a"): 5.0, (3.0, "a"): (10.0 + seed) / (1.0 + 0.03 * seed),
                (1.0, "b"): None}  # fmt: skip
        for (rho, loss), t in base.items():
            cells.append(Cell("classic_fr", rho, loss, seed, Outcome(t, t)))
        for (rho, loss), t in mine.items():
            end = 50.0 if t is None else t
            cells.append(Cell("x", rho, loss, seed, Outcome(t, end)))
    rows = {(r.rho, r.loss): r for r in compare_cells(cells, {"x": "classic_fr"})}
    assert rows[1.0, "a"].ratio.mean == pytest.approx(2.0) and rows[1.0, "a"].label == "faster"
    assert rows[3.0, "a"].label == "not distinguishable"
    assert rows[1.0, "b"].horizon == 50.0 and rows[1.0, "b"].label == "slower"
    assert rows[1.0, "b"].ratio.mean == pytest.approx(20.0 / 50.0)
    assert [r.label for r in compare_cells(cells, {"x": "classic_fr"}, invalid=True)] == [
        "invalid (A/A)"
    ] * 3
    table = markdown(list(rows.values()), [1.0, 3.0], ["a", "b"])
    assert "| a | 2.00▲ | 1.0" in table and "| b | 0.40▼ | – |" in table
    png = heat_maps(list(rows.values()), [1.0, 3.0], ["a", "b"], tmp_path / "map.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_map_verification_pairs_real_runs_with_their_cells():
    pairs = [("x", 1.0, "a", s, Outcome(10.0 * (1 + 0.01 * s), 20.0), Outcome(10.0, 20.0))
             for s in range(3)]  # fmt: skip
    pairs.append(("x", 1.0, "a", 3, Outcome(None, 20.0), Outcome(10.0, 20.0)))  # unreached
    ((variant, rho, loss, ratio, count),) = verify_rows(pairs)
    assert (variant, rho, loss, count) == ("x", 1.0, "a", 3)
    assert ratio.mean == pytest.approx(math.exp(np.mean(np.log([1.0, 1.01, 1.02]))))
