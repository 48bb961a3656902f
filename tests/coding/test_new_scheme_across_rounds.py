"""A scheme across rounds (T > 0) is one module + one YAML outside gclab, like a static one.

``tests/coding/newscheme/slack_gc`` is a researcher's package: ``catch_up`` is uncoded,
and a worker catches up on a part of the last ``T`` jobs that had not arrived when the
round began, which the decoder's round hook (``Decoder.begin_round``) fixes.
``hydra.searchpath=[pkg://slack_gc]`` makes Hydra import it (the class registers, the
config layer derives its schema) and find ``scheme/catch_up.yaml``; nothing in gclab
names it. The tiny trace's numbers are worked out by hand in the test.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from hydra.errors import ConfigCompositionException

from gclab.app import run
from gclab.coding.contract import SCHEMES
from gclab.coding.uncoded import Uncoded
from gclab.network import NetworkConfig
from gclab.network.trace import Trace
from gclab.sim.engine import simulate
from gclab.tracking.artifacts import load_checkpoint, read_metrics
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process
from helpers.newscheme import simulate_cli
from helpers.training import (
    assert_same_weights,
    interleaved_references,
    reference_weights,
    rotating_straggler_trace,
)

PACKAGES = Path(__file__).parent / "newscheme"
SEARCHPATH = "hydra.searchpath=[pkg://slack_gc]"
JOBS = 6


@pytest.fixture(scope="module")
def slack() -> Iterator[ModuleType]:
    """The package ``slack_gc``, importable here and in the simulator's subprocess.

    Imported once for the module: its class registers a config schema, which Hydra's
    store takes once per name.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(PACKAGES))
        patch.setenv(
            "PYTHONPATH", os.pathsep.join([str(PACKAGES), os.environ.get("PYTHONPATH", "")])
        )
        yield importlib.import_module("slack_gc")
    SCHEMES.pop("catch_up", None)
    sys.modules.pop("slack_gc", None)


def two_worker_trace(path: Path) -> Trace:
    """Worker 1 is 50x slower in round 0: its packet misses the deadline close."""
    np.savez(path, durations=np.array([[1.0, 1.0, 1.0], [50.0, 1.0, 1.0]]), load=0.0)
    return Trace(str(path), slope=0.0)


def test_a_late_part_is_caught_up_in_the_next_round_by_the_simulator(slack, tmp_path) -> None:
    """Round 0 closes at 2 s (μ = 1: twice the fastest arrival) without worker 1; job 0 is
    not due yet (T = 1), and in round 1, planned when it begins, worker 1 sends its parts of
    jobs 0 and 1: both decode at the close, 1 s (every packet in). Round 2 serves nothing.
    With T = 0 the scheme is uncoded: round 0 waits 50 s for worker 1's packet."""
    network = NetworkConfig(policy="deadline", mu=1.0)
    delay = two_worker_trace(tmp_path / "trace.npz")
    got = simulate(slack.CatchUp(2, T=1), delay, network, jobs=2, seed=0)
    assert got.index.tolist() == [0, 1] and got.durations.tolist() == [2.0, 1.0]
    assert got.erasures.tolist() == [1, 0] and got.retransmissions.tolist() == [0, 0]
    assert got.total_time == 3.0 and not got.waited.any()
    uncoded = simulate(Uncoded(2), delay, network, jobs=2, seed=0)
    same = simulate(slack.CatchUp(2, T=0), delay, network, jobs=2, seed=0)
    assert uncoded.total_time == same.total_time == 51.0 and same.waited.tolist() == [True, False]


def test_the_plan_of_a_round_is_fixed_when_it_begins(slack) -> None:
    decoder = slack.CatchUp(3, T=1).decoder()
    decoder.begin_round(0)
    for w in (0, 2):  # worker 1's round-0 packet does not arrive
        decoder.receive(0, w, None)
    decoder.begin_round(1)
    assert [[t.job for t in tasks] for tasks in decoder.plan(1)] == [[1], [1, 0], [1]]
    decoder.receive(0, 1, None)  # arrives late (recovery): round 1's plan stays as it began
    assert decoder.decodable() == [0] and len(decoder.plan(1)[1]) == 2


def catch_up_config(tmp_path: Path, *extra: str):
    trace = rotating_straggler_trace(tmp_path / "trace.npz", 4, 12)
    return compose_config(
        [SEARCHPATH, "scheme=catch_up", *TINY, "cluster.workers=4", f"train.rounds={JOBS}",
         "delay=trace", f"delay.path={trace}", "delay.slope=0", *extra]
    )  # fmt: skip


def round_records(run_dir: Path) -> list[dict]:
    return [r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "round"]


@pytest.mark.usefixtures("slack")
def test_interleaved_training_decodes_every_job_a_round_late_and_equals_sgd(tmp_path) -> None:
    """Worker ``r mod 4`` misses round r; it catches up in round r + 1 on the model of
    job r (interleaved: T + 1 models), so each model gets exact SGD on its own jobs."""
    cfg = catch_up_config(tmp_path, "train.pipeline=interleaved")
    want = interleaved_references(cfg)
    run(cfg, tmp_path / "run", start_pool=in_process)
    got = load_checkpoint(tmp_path / "run" / "checkpoint.pt")["models"]
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        assert_same_weights(g, w)
    rounds = round_records(tmp_path / "run")
    assert [r["decode_delays"] for r in rounds] == [[]] + [[1]] * JOBS  # the last: a drain round
    assert [r["erasures"] for r in rounds] == [1] * (JOBS + 1)
    assert not any(r["waited"] or r["retransmissions"] for r in rounds)


@pytest.mark.usefixtures("slack")
def test_stale_training_without_stragglers_decodes_at_once_and_equals_sgd(tmp_path) -> None:
    cfg = compose_config(
        [SEARCHPATH, "scheme=catch_up", *TINY, "cluster.workers=4", f"train.rounds={JOBS}"]
    )
    run(cfg, tmp_path / "run", start_pool=in_process)
    assert_same_weights(
        load_checkpoint(tmp_path / "run" / "checkpoint.pt")["model"], reference_weights(cfg)
    )
    assert [r["decode_delays"] for r in round_records(tmp_path / "run")] == [[0]] * JOBS


def simulate_catch_up(out: Path, *extra: str) -> dict:
    """``python -m gclab.sim`` on ``catch_up``; its summary."""
    return simulate_cli("slack_gc", "catch_up", out, *extra)


@pytest.mark.slow
@pytest.mark.usefixtures("slack")
def test_a_scheme_across_rounds_composes_simulates_searches_and_trains(tmp_path) -> None:
    cfg = compose_config([SEARCHPATH, "scheme=catch_up", *TINY, "train.rounds=2"])
    assert cfg.scheme._target_ == "slack_gc.CatchUp" and cfg.scheme.T == 1  # the default
    with pytest.raises(ConfigCompositionException):
        compose_config([SEARCHPATH, "scheme=catch_up", "scheme.TT=1"])  # typos fail
    with pytest.raises(ConfigCompositionException):
        compose_config([SEARCHPATH, "scheme=catch_up", "scheme.T=abc"])  # so do wrong types

    summary = simulate_catch_up(tmp_path / "sim")
    assert summary["jobs"] == 20 and summary["scheme"] == "catch_up(n=4, s=0, T=1)"
    searched = simulate_catch_up(tmp_path / "search", "sim.search=true")
    trials = json.loads((tmp_path / "search" / "search.json").read_text())
    assert sorted(t["params"]["T"] for t in trials) == [0, 1, 2]  # the toy's own grid
    assert searched["settings"] == 3

    summary = run(cfg, tmp_path / "train", start_pool=in_process)
    assert len(round_records(tmp_path / "train")) == 2 and summary["scheme"] == "catch_up"
