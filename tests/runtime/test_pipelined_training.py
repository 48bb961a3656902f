"""Training with schemes that code across time (T > 0): both pipeline semantics.

The loop runs with in-process workers (``helpers.inprocess``); the interleaved exactness
of pipelined_cr also runs on real Ray actors.
"""

import numpy as np
import pytest
from hydra.utils import instantiate

from gclab.app import build, run
from gclab.errors import ConfigError
from gclab.tracking.artifacts import load_checkpoint, read_metrics
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process
from helpers.training import (
    assert_same_weights,
    interleaved_references,
    reference_weights,
    rotating_straggler_trace,
    trained_weights,
)

JOBS = 6


def alternating_straggler_trace(path, n: int, rounds: int):
    """Worker 0 is 50x slower in even rounds: fits M-SGC's (B=1, W=2, λ=1) model."""
    durations = np.ones((n, rounds))
    durations[0, ::2] = 50.0
    np.savez(path, durations=durations, load=0.0)
    return path


INTERLEAVED = [
    (["scheme=pipelined_cr", "scheme.s=1", "scheme.T=1"], rotating_straggler_trace),
    (["scheme=pipelined_fr", "scheme.s=1", "scheme.T=2"], rotating_straggler_trace),
    (["scheme=m_sgc", "scheme.B=1", "scheme.W=2", "scheme.lam=1"], alternating_straggler_trace),
]


@pytest.mark.parametrize(
    ("scheme", "pattern"), INTERLEAVED, ids=["pipelined_cr", "pipelined_fr", "m_sgc"]
)
def test_interleaved_equals_independent_sgd_runs_under_tolerated_erasures(
    tmp_path, scheme, pattern
):
    check_interleaved(tmp_path, scheme, pattern, in_process)


@pytest.mark.slow
def test_on_ray_interleaved_pipelined_cr_equals_independent_sgd_runs(ray_session, tmp_path):
    check_interleaved(tmp_path, *INTERLEAVED[0], None)


@pytest.mark.slow
def test_on_ray_64_workers_in_two_actors_interleaved_sr_sgc_equals_independent_sgd_runs(
    ray_session, tmp_path
):
    """At scale each actor hosts 32 workers, which share most of their 4 tasks each."""
    scheme = ["scheme=sr_sgc", "scheme.B=2", "scheme.W=3", "scheme.lam=6"]  # s = 3, T = 2
    extra = ["train.batch_size=128", "cluster.actors=2", "cluster.worker_cpus=0"]
    check_interleaved(tmp_path, scheme, rotating_straggler_trace, None, n=64, extra=extra)


def check_interleaved(tmp_path, scheme, pattern, start_pool, n=4, extra=()) -> None:
    trace = pattern(tmp_path / "trace.npz", n, 12)
    cfg = compose_config(
        [*TINY, *scheme, f"cluster.workers={n}", f"train.rounds={JOBS}",
         "train.pipeline=interleaved", "delay=trace", f"delay.path={trace}", "delay.slope=0",
         *extra]
    )  # fmt: skip
    want = interleaved_references(cfg)
    run(cfg, tmp_path / "run", start_pool=start_pool)
    got = load_checkpoint(tmp_path / "run" / "checkpoint.pt")["models"]
    assert len(got) == len(want) >= 2
    for g, w in zip(got, want):
        assert_same_weights(g, w)
    rounds = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "round"]
    assert sum(r["jobs_decoded"] for r in rounds) == JOBS
    slow = np.load(trace)["durations"][:, : len(rounds)] > 1
    assert [r["erasures"] for r in rounds] == slow.sum(axis=0).tolist()  # stragglers erased
    assert not any(r["waited"] for r in rounds)  # ... and tolerated: nobody waited
    T = instantiate(cfg.scheme, n=n).T
    assert all(0 <= d <= T for r in rounds for d in r["decode_delays"])


def test_pipelined_with_T0_and_no_losses_trains_exactly_like_classic(tmp_path):
    base = [*TINY, "cluster.workers=4", f"train.rounds={JOBS}", "scheme.s=1"]
    pipelined = trained_weights(
        compose_config([*base, "scheme=pipelined_cr", "scheme.T=0"]), tmp_path / "p", in_process
    )
    classic_cfg = compose_config([*base, "scheme=classic_cr"])
    assert_same_weights(pipelined, trained_weights(classic_cfg, tmp_path / "c", in_process))
    assert_same_weights(pipelined, reference_weights(classic_cfg))


def test_stale_pipeline_decodes_every_job_within_T_under_bursty_loss(tmp_path):
    cfg = compose_config(
        [*TINY, "scheme=pipelined_cr", "scheme.s=1", "scheme.T=2", "cluster.workers=4",
         "train.rounds=12", "delay=gilbert_elliott", "delay.loss_rate=0.2",
         "delay.burst_length=3", "network.policy=all"]
    )  # fmt: skip
    summary = run(cfg, tmp_path, start_pool=in_process)
    rounds = [r for r in read_metrics(tmp_path / "metrics.jsonl") if r["kind"] == "round"]
    assert len(rounds) <= 14 and summary["jobs"] == 12
    assert rounds[-1]["jobs_decoded"] > 0  # the run ends with its last job: no idle round
    assert sum(r["lost"] for r in rounds) > 0
    assert all(0 <= d <= 2 for r in rounds for d in r["decode_delays"])
    assert summary["decode_delay_max"] <= 2


def test_stale_pipeline_without_losses_decodes_at_delay_zero_and_is_exact_sgd(tmp_path):
    cfg = compose_config(
        [*TINY, "scheme=pipelined_cr", "scheme.s=1", "scheme.T=2", "cluster.workers=4",
         f"train.rounds={JOBS}", "network.policy=all"]
    )  # fmt: skip
    assert_same_weights(trained_weights(cfg, tmp_path, in_process), reference_weights(cfg))
    rounds = [r for r in read_metrics(tmp_path / "metrics.jsonl") if r["kind"] == "round"]
    assert [r["decode_delays"] for r in rounds] == [[0]] * JOBS  # no drain round: all decoded


def test_every_scheme_trains_interleaved_models_in_turn_each_exact_at_its_own_rate(tmp_path):
    """A T = 0 scheme (classic_fr) and SR-SGC (T = 1) train the same three models, job t on
    model t mod 3, each from its own initial weights at its own learning rate: both end
    with the weights of three single-process SGD runs on the models' own jobs."""
    trace = rotating_straggler_trace(tmp_path / "trace.npz", 4, 12)
    common = [*TINY, "cluster.workers=4", "train.rounds=9", "train.pipeline=interleaved",
              "train.models=3", "train.lrs=[0.05,0.1,0.02]", "delay=trace",
              f"delay.path={trace}", "delay.slope=0"]  # fmt: skip
    arms = {
        "classic_fr": ["scheme=classic_fr", "scheme.s=1"],
        "sr_sgc": ["scheme=sr_sgc", "scheme.B=1", "scheme.W=2", "scheme.lam=1"],
    }
    want = interleaved_references(compose_config([*common, *arms["classic_fr"]]))
    assert len({float(w["head.3.bias"].sum()) for w in want}) == 3  # the models differ
    for name, scheme in arms.items():
        cfg = compose_config([*common, *scheme])
        run(cfg, tmp_path / name, start_pool=in_process)
        got = load_checkpoint(tmp_path / name / "checkpoint.pt")["models"]
        assert len(got) == 3
        for g, w in zip(got, want):
            assert_same_weights(g, w)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (["scheme=pipelined_cr", "scheme.s=1", "scheme.T=2", "train.pipeline=interleaved",
          "train.models=2"], "train.models=2 is invalid for a scheme with T=2"),
        (["train.models=3"], "train.models=3 needs train.pipeline=interleaved"),
        (["train.pipeline=interleaved", "train.models=2", "train.lrs=[0.1]"],
         r"train.lrs=\[0.1\] names 1 learning rates for 2 model"),
        (["train.pipeline=interleaved", "train.models=2", "train.lrs=[0.1,-1]"],
         "every learning rate must be a finite number > 0"),
    ],
)  # fmt: skip
def test_interleaved_models_refuse_what_would_not_be_exact_sgd(keys, message):
    with pytest.raises(ConfigError, match=message):
        build(compose_config([*TINY, "cluster.workers=4", *keys]))
