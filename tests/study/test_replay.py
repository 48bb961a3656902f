"""The study's shortcut: a finished run replayed under another delay model.

Real runs check the two facts the shortcut rests on: replaying a lossy run on its own
recorded compute times gives back its recorded virtual times exactly, and a lossy run of
an exact scheme has the accuracy per job of the lossless one. Hand-made source runs
check the bookkeeping (where each evaluation lands, extension rounds, refusals).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from gclab.app import run
from gclab.study.replay import (
    ReplayError,
    build_protocol,
    payload_of,
    replay_rounds,
    replay_run,
    retime_run,
)
from gclab.tracking.artifacts import load_checkpoint, read_metrics
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process

BASE = [*TINY, "cluster.workers=4", "train.rounds=10", "train.eval_every=2", "network.policy=all"]
CLASSIC = ["scheme=classic_cr", "scheme.s=1"]
INTERLEAVED = ["scheme=pipelined_fr", "scheme.s=1", "scheme.T=2", "train.pipeline=interleaved"]
LOSSY = ["delay=bernoulli", "delay.p=0.25"]
BURSTS = ["delay=gilbert_elliott", "delay.loss_rate=0.4", "delay.burst_length=3"]
#: The study's clock: links that charge bytes, bursts in seconds.
LINKS = ["network.bandwidth=1e6", "network.server_bandwidth=4e6", "network.broadcast_bandwidth=4e6"]
TIMED_BURSTS = ["delay=gilbert_elliott_time", "delay.loss_rate=0.3", "delay.burst_seconds=0.05"]


def records(path: Path, kind: str) -> list[dict]:
    return [r for r in read_metrics(path / "metrics.jsonl") if r["kind"] == kind]


def train(overrides: list[str], run_dir: Path) -> dict:
    """A real run, with the ``.hydra/config.yaml`` the CLI would have written beside it."""
    cfg = compose_config(overrides)
    (run_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
    return run(cfg, run_dir, start_pool=in_process)


def replay_into(source: Path, overrides: list[str], dest: Path) -> dict:
    return replay_run(source, compose_config(overrides), dest, overrides, {"delay": "x"})


# --- real runs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scheme", "bitwise"),
    [(["scheme=classic_fr", "scheme.s=1"], True), (CLASSIC, False), (INTERLEAVED, False)],
    ids=["classic_fr", "classic_cr", "interleaved_fr"],
)
def test_losses_change_an_exact_schemes_weights_by_rounding_at_most(tmp_path, scheme, bitwise):
    """Fractional repetition decodes a lost packet's replica, the same bits: the weights
    are identical. Cyclic repetition (other coefficients) and a pipeline (a job assembled
    from other packets) sum in another order: the weights differ by float rounding, which
    SGD then grows (docs/study.md, "The shortcut against real runs")."""
    weights = []
    for name, loss in (("lossless", []), ("lossy", LOSSY)):
        train([*BASE, *scheme, *loss], tmp_path / name)
        state = load_checkpoint(tmp_path / name / "checkpoint.pt")
        weights.append(torch.cat([t.flatten() for m in state["models"] for t in m.values()]))
    assert torch.equal(*weights) == bitwise
    assert torch.allclose(*weights, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "overrides",
    [[*CLASSIC, *LOSSY], [*INTERLEAVED, *BURSTS], [*CLASSIC, *LINKS, *TIMED_BURSTS]],
    ids=["classic_cr", "interleaved", "classic_cr_links_timed_bursts"],
)
def test_replaying_a_lossy_run_on_its_own_compute_times_gives_its_virtual_times(
    tmp_path, overrides
):
    """Round for round the replay is the run: bytes on the links included. An evaluation
    lands where its state was first reached: in the round that applied its last job (T = 0:
    the evaluation's own round; interleaved: a job decoded late makes a later round's
    evaluation belong to it)."""
    summary = train([*BASE, *overrides], tmp_path / "real")
    replayed = replay_into(tmp_path / "real", [*BASE, *overrides], tmp_path / "replay")
    real, replay = records(tmp_path / "real", "round"), records(tmp_path / "replay", "round")
    assert sum(r["retransmissions"] for r in real) > 0  # losses really cost time
    keys = (
        "virtual_time", "round_time", "erasures", "lost", "retransmissions", "decode_delays",
        "bytes",
    )  # fmt: skip
    assert [{k: r[k] for k in keys} for r in replay] == [{k: r[k] for k in keys} for r in real]
    assert summary["payload_bytes"] > 0  # a float32 gradient's bytes, links or not

    last_applied_in = {}  # round -> the round that applied the newest job applied by then
    for rec in real:
        last_applied_in[rec["round"]] = (
            rec["round"] if rec["jobs_applied"] else last_applied_in[rec["round"] - 1]
        )
    clock = {rec["round"]: rec["virtual_time"] for rec in real}
    evals = records(tmp_path / "real", "eval")
    want = [(last_applied_in[e["round"]], e["test_accuracy"]) for e in evals]
    got = records(tmp_path / "replay", "eval")
    assert [(e["round"], e["test_accuracy"]) for e in got] == want
    assert [e["virtual_time"] for e in got] == [clock[r] for r, _ in want]
    if "scheme=classic_cr" in overrides:  # T = 0: exactly the run's own evaluations
        assert [(e["round"], e["virtual_time"]) for e in got] == [
            (e["round"], e["virtual_time"]) for e in evals
        ]
    assert replayed["total_virtual_time"] == summary["total_virtual_time"]
    assert replayed["extended_rounds"] == 0 and replayed["replayed_from"] == str(tmp_path / "real")


def test_a_run_recorded_without_its_payload_is_replayed_from_the_bytes_it_sent(tmp_path):
    """Runs recorded before ``payload_bytes`` was: their first round's bytes give it."""
    overrides = [*BASE, *CLASSIC, *LINKS, *LOSSY]
    summary = train(overrides, tmp_path / "real")
    rounds = records(tmp_path / "real", "round")
    older = {k: v for k, v in summary.items() if k != "payload_bytes"}
    assert payload_of(older, rounds, compose_config(overrides)) == summary["payload_bytes"] > 0
    (tmp_path / "real" / "summary.json").write_text(json.dumps(older), encoding="utf-8")
    replay_into(tmp_path / "real", overrides, tmp_path / "replay")
    times = [r["virtual_time"] for r in records(tmp_path / "replay", "round")]
    assert times == [r["virtual_time"] for r in rounds]


def test_a_lossy_run_of_an_exact_scheme_has_the_accuracy_per_job_of_the_lossless_one(tmp_path):
    train([*BASE, *CLASSIC], tmp_path / "lossless")
    train([*BASE, *CLASSIC, *LOSSY], tmp_path / "lossy")
    lossless, lossy = records(tmp_path / "lossless", "eval"), records(tmp_path / "lossy", "eval")
    assert [r["test_accuracy"] for r in lossy] == [r["test_accuracy"] for r in lossless]
    assert lossy[-1]["virtual_time"] > lossless[-1]["virtual_time"]  # same accuracy, later
    replayed = replay_into(tmp_path / "lossless", [*BASE, *CLASSIC, *LOSSY], tmp_path / "replay")
    got = records(tmp_path / "replay", "eval")
    assert [r["test_accuracy"] for r in got] == [r["test_accuracy"] for r in lossy]
    # the same losses; how many retransmissions go out before a round closes depends on
    # when the packets would have arrived, so on the measured compute times
    assert [r["lost"] for r in records(tmp_path / "replay", "round")] == [
        r["lost"] for r in records(tmp_path / "lossy", "round")
    ]
    assert replayed["retransmissions"] > 0


# --- hand-made source runs ---------------------------------------------------------------


def source_run(path: Path, overrides: list[str], rounds: int, evals: dict[int, float]) -> Path:
    """A finished lossless run as the app writes it: every job decoded in its own round,
    every worker computing 1 s (``num_jobs`` = ``rounds``), evaluations after ``evals``."""
    (path / ".hydra").mkdir(parents=True)
    OmegaConf.save(compose_config(overrides), path / ".hydra" / "config.yaml")
    lines = []
    for r in range(rounds):
        lines.append({"kind": "round", "round": r, "jobs_applied": 1, "train_loss": 2.0 - r / 10,
                      "compute_s": [1.0] * 4})  # fmt: skip
        if r in evals:
            lines.append({"kind": "eval", "round": r, "test_accuracy": evals[r], "test_loss": 1.0})
    (path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (path / "summary.json").write_text(json.dumps({"num_jobs": rounds}))
    return path


def test_each_evaluation_lands_where_the_replay_applies_its_job(tmp_path):
    overrides = [*BASE, *INTERLEAVED, "train.target_accuracy=0.5"]
    source = source_run(tmp_path / "src", overrides, 10, {r: r / 10 for r in range(10)})
    summary = replay_into(source, [*overrides, "delay=bernoulli", "delay.p=0.5"], tmp_path / "out")
    rounds = records(tmp_path / "out", "round")
    applied_at = {}
    for rec in rounds:
        done = sum(r["jobs_applied"] for r in rounds if r["round"] <= rec["round"])
        for job in range(done):
            applied_at.setdefault(job, rec["round"])
    evals = records(tmp_path / "out", "eval")
    assert [(e["round"], e["test_accuracy"]) for e in evals] == [
        (applied_at[j], j / 10) for j in range(10)
    ]
    assert any(applied_at[j] > j for j in range(10))  # some evaluations moved to later rounds
    clock = {r["round"]: r["virtual_time"] for r in rounds}
    assert [e["virtual_time"] for e in evals] == [clock[e["round"]] for e in evals]
    assert summary["time_to_target"] == clock[applied_at[5]]
    assert [r["train_loss"] for r in rounds[:10]] == [2.0 - r / 10 for r in range(10)]
    assert summary["test_accuracy"] == 0.9
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert written["decode_ms_mean"] is None and written["total_wall_time"] is None  # nothing ran


def test_a_source_that_stopped_early_is_extended_until_its_last_evaluated_job_applies(tmp_path):
    """A run stopped at its target has no rounds after its last evaluation; with T = 2 the
    replay may need two more, on the last recorded compute times."""
    overrides = [*BASE, *INTERLEAVED, "delay=bernoulli", "delay.p=0.6"]
    cfg = compose_config(overrides)
    compute = np.ones((6, 4))
    server = np.zeros(6)  # measured seconds of server work per round
    replay = replay_rounds(*build_protocol(cfg), compute, num_jobs=10, until=5, server=server)
    assert 5 in replay.applied_at and replay.applied_at[5] <= 5 + 2
    assert len(replay.rounds) == max(6, replay.applied_at[5] + 1)
    assert replay.extended == len(replay.rounds) - 6
    assert all(step.decoded == [j for j in step.decoded if j < 10] for step in replay.rounds)
    with pytest.raises(ValueError, match="job 10 never runs"):
        replay_rounds(*build_protocol(cfg), compute, num_jobs=10, until=10, server=server)


def test_replays_that_would_be_wrong_are_refused(tmp_path):
    stale = [*BASE, "scheme=pipelined_cr", "scheme.s=1", "scheme.T=2"]
    source_run(tmp_path / "stale", stale, 4, {3: 0.3})
    with pytest.raises(ReplayError, match="not replayable"):
        replay_into(tmp_path / "stale", [*stale, *LOSSY], tmp_path / "a")
    source_run(tmp_path / "classic", [*BASE, *CLASSIC], 4, {3: 0.3})
    with pytest.raises(ReplayError, match=r"differs .* in train\.lr, not only in the delay"):
        replay_into(tmp_path / "classic", [*BASE, *CLASSIC, *LOSSY, "train.lr=0.1"], tmp_path / "b")
    (tmp_path / "classic" / "summary.json").unlink()
    with pytest.raises(ReplayError, match="has not finished"):
        replay_into(tmp_path / "classic", [*BASE, *CLASSIC, *LOSSY], tmp_path / "c")
    faulty = [*BASE, *CLASSIC, "faults.nan=[1:0]"]
    source_run(tmp_path / "faulty", faulty, 4, {3: 0.3})
    with pytest.raises(ReplayError, match="not replayable"):
        replay_into(tmp_path / "faulty", [*faulty, *LOSSY], tmp_path / "d")
    partial = [*BASE, *CLASSIC, "network.recovery=partial"]
    source_run(tmp_path / "partial", partial, 4, {3: 0.3})
    with pytest.raises(ReplayError, match=r"not replayable.*network\.recovery=partial"):
        replay_into(tmp_path / "partial", [*partial, *LOSSY], tmp_path / "e")


# --- the normalised clock ------------------------------------------------------------------

STALE_LOSSY = [*BASE, "scheme=pipelined_cr", "scheme.s=1", "scheme.T=2", *BURSTS]


def compute_times(run_dir: Path) -> np.ndarray:
    return np.array([r["compute_s"] for r in records(run_dir, "round")])


def test_retiming_scales_every_compute_time_and_keeps_each_jobs_round(tmp_path):
    """A stale pipeline under bursts of loss (jobs decoded late): re-timed to its own
    median it is the run, round for round; re-timed to twice that, every compute time
    doubles, the rounds apply the same jobs and each evaluation keeps its accuracy."""
    summary = train(STALE_LOSSY, tmp_path / "real")
    real = records(tmp_path / "real", "round")
    assert any(r["decode_delays"] and max(r["decode_delays"]) > 0 for r in real)  # late jobs
    median = float(np.median(compute_times(tmp_path / "real")))

    same = retime_run(tmp_path / "real", tmp_path / "same", median)
    keys = ("virtual_time", "jobs_applied", "retransmissions", "decode_delays", "compute_s")
    got = records(tmp_path / "same", "round")
    assert [{k: r[k] for k in keys} for r in got] == [{k: r[k] for k in keys} for r in real]
    assert same["total_virtual_time"] == summary["total_virtual_time"]
    assert same["compute_scale"] == 1.0 and same["retimed_from"] == str(tmp_path / "real")

    double = retime_run(tmp_path / "real", tmp_path / "double", 2 * median)
    assert double["compute_scale"] == pytest.approx(2.0)
    np.testing.assert_allclose(
        compute_times(tmp_path / "double"), 2 * compute_times(tmp_path / "real")
    )
    slow = records(tmp_path / "double", "round")
    assert [r["jobs_applied"] for r in slow] == [r["jobs_applied"] for r in real]
    assert all(b["virtual_time"] > a["virtual_time"] for a, b in zip(real, slow))
    evals = [(e["round"], e["test_accuracy"]) for e in records(tmp_path / "real", "eval")]
    assert [(e["round"], e["test_accuracy"]) for e in records(tmp_path / "double", "eval")] == evals
    configs = [
        OmegaConf.load(p / ".hydra" / "config.yaml")
        for p in (tmp_path / "real", tmp_path / "double")
    ]
    assert configs[0] == configs[1]  # the same run, on another clock
    # the server's measured work is scaled like the compute and charged, as the run did
    server = [r["server_ms"] for r in real]
    assert all(t > 0 for t in server)
    np.testing.assert_allclose([r["server_ms"] for r in slow], 2 * np.array(server))
    np.testing.assert_allclose([r["server_time"] for r in slow], 2e-3 * np.array(server))


def test_retiming_can_charge_the_server_time_a_run_measured_but_did_not_charge(tmp_path):
    train([*BASE, *CLASSIC, "network.server_time=0"], tmp_path / "real")
    real = records(tmp_path / "real", "round")
    assert all(r["server_time"] == 0 and r["server_ms"] > 0 for r in real)
    median = float(np.median(compute_times(tmp_path / "real")))
    plain = retime_run(tmp_path / "real", tmp_path / "plain", median)
    charged = retime_run(tmp_path / "real", tmp_path / "charged", median, charge_server=True)
    extra = sum(r["server_ms"] for r in real) / 1e3
    assert charged["server_time_total"] == pytest.approx(extra)
    assert charged["total_virtual_time"] == pytest.approx(plain["total_virtual_time"] + extra)
    assert plain["server_time_total"] == 0


def test_a_run_that_names_a_class_where_it_used_to_be_is_still_retimed(tmp_path):
    """Runs archived before SR-SGC left ``gclab.coding.sgc`` name it there."""
    summary = train([*BASE, "scheme=sr_sgc"], tmp_path / "real")
    path = tmp_path / "real" / ".hydra" / "config.yaml"
    text = path.read_text()
    assert "gclab.coding.sr_sgc.SRSGC" in text
    path.write_text(text.replace("gclab.coding.sr_sgc.SRSGC", "gclab.coding.sgc.SRSGC"))
    median = float(np.median(compute_times(tmp_path / "real")))
    same = retime_run(tmp_path / "real", tmp_path / "same", median)
    assert same["total_virtual_time"] == summary["total_virtual_time"]


def test_a_retiming_that_would_move_jobs_between_rounds_is_refused(tmp_path):
    train(STALE_LOSSY, tmp_path / "real")
    lines = (tmp_path / "real" / "metrics.jsonl").read_text().splitlines()
    tampered = [json.loads(line) for line in lines]
    first = next(r for r in tampered if r["kind"] == "round" and r["jobs_applied"])
    first["jobs_applied"] += 1  # as if the run had applied another job in that round
    (tmp_path / "real" / "metrics.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in tampered)
    )
    with pytest.raises(
        ReplayError, match=f"changes which jobs are applied from round {first['round']} on"
    ):
        retime_run(tmp_path / "real", tmp_path / "retimed", 0.05)
    assert not (tmp_path / "retimed").exists()


def test_a_replay_ends_at_the_time_budget_as_the_run_would(tmp_path):
    """The training loop stops after the round whose clock reaches train.time_budget; a
    replay ends there too, the evaluations after it dropped, so a replayed target reached
    only past the budget is not reached (study v2 counted uncoded's 300.3 s as reached)."""
    overrides = [*BASE, "scheme=classic_fr", "scheme.s=1", "train.target_accuracy=0.85",
                 "network.rto=1.0"]  # fmt: skip
    source = source_run(tmp_path / "src", overrides, 10, {r: r / 10 for r in range(10)})
    lossy = [*overrides, "delay=bernoulli", "delay.p=0.5"]
    full = replay_into(source, lossy, tmp_path / "full")
    clock = [r["virtual_time"] for r in records(tmp_path / "full", "round")]
    assert full["time_to_target"] == clock[9] > clock[5]  # reached at the last evaluation
    budget = (clock[5] + clock[6]) / 2  # the run stops after round 6
    budgeted = [*overrides, f"train.time_budget={budget}"]
    source = source_run(tmp_path / "src2", budgeted, 10, {r: r / 10 for r in range(10)})
    assert budget > 10  # beyond the lossless source's 10 rounds of 1 s: it ran them all
    cut = replay_into(source, [*budgeted, *lossy[len(overrides) :]], tmp_path / "cut")
    rounds = records(tmp_path / "cut", "round")
    assert [r["virtual_time"] for r in rounds] == clock[:7]
    assert [e["round"] for e in records(tmp_path / "cut", "eval")] == list(range(7))
    assert cut["time_to_target"] is None and cut["total_virtual_time"] == clock[6]
