"""``train.pipeline=stale`` against an independent single-process reference.

The run trains one model under losses that delay decoding (the pipelines, T = 2), or
with a code that computes parts of job t in later rounds (SR-SGC, M-SGC). The reference
(:func:`gclab.ml.reference.train_stale`) computes job t's gradient on the weights it
holds when round t starts and applies decoded jobs in job order, taking the decode
round of every job from the run's metrics.jsonl; those decode rounds are checked
against the scheme's symbolic decoder driven by the same seeded protocol on the run's
recorded compute times. Equal weights, to float tolerance, mean the runtime computes
every job on the weights the server had when its round started and applies it with the
staleness the reference derives on its own; the report's staleness, derived from the
jobs applied per round, is that staleness too.
"""

import numpy as np
import pytest
import torch
from hydra.utils import instantiate

from gclab.app import build
from gclab.ml.reference import train_stale
from gclab.report.runs import staleness as report_staleness
from gclab.study.replay import build_protocol, replay_rounds
from gclab.tracking.artifacts import read_metrics
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process
from helpers.training import assert_same_weights, reference_weights, trained_weights

JOBS = 12
#: Weight tolerance. Rounding-level differences (a worker sums its part gradients, the
#: reference takes the batch at once; decoding adds ~1e-7 relative) can flip a ReLU or
#: max-pool decision: perturbing one reference gradient by 1e-7 relative moved these
#: weights by up to 7e-5. What the test tells apart (the other staleness rule, plain SGD)
#: differs by ~1e-2.
TOL = 5e-4
BERNOULLI = ["delay=bernoulli", "delay.p=0.3"]
BURSTS = ["delay=gilbert_elliott", "delay.loss_rate=0.3", "delay.burst_length=3"]


def decoded_per_round(run_dir) -> list[list[int]]:
    """Jobs decoded in each round, from the run's own records."""
    rounds = [r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "round"]
    return [[rec["round"] - d for d in rec["decode_delays"]] for rec in rounds]


def stale_reference(cfg, decoded: list[list[int]], scaled: bool) -> dict[str, torch.Tensor]:
    plan, _ = build(cfg)
    torch.manual_seed(plan.seed)
    flat = train_stale(
        instantiate(plan.model_cfg), plan.data, plan.scheme.k, plan.batch_size, plan.seed,
        plan.augment, plan.build_optimizer, decoded, scaled=scaled,
    )  # fmt: skip
    return flat.model.state_dict()


def staleness(decoded: list[list[int]]) -> list[int]:
    """Staleness of each applied job: jobs applied before it minus those its weights had."""
    seen, done, ready, out = {}, 0, set(), []
    for r, jobs in enumerate(decoded):
        seen[r] = done
        ready.update(jobs)
        while done in ready:
            out.append(done - seen[done])
            done += 1
    return out


PIPELINED_CR = ["scheme=pipelined_cr", "scheme.s=1", "scheme.T=2"]
PIPELINED_FR = ["scheme=pipelined_fr", "scheme.s=1", "scheme.T=2"]
#: Codes that compute tasks of job t in later rounds too: SR-SGC redoes them, M-SGC's
#: slot m serves job r - m. They are checked without loss as well: M-SGC is stale then.
SR_SGC = ["scheme=sr_sgc", "scheme.B=1", "scheme.W=2", "scheme.lam=1"]
M_SGC = ["scheme=m_sgc", "scheme.B=1", "scheme.W=2", "scheme.lam=1"]


@pytest.mark.parametrize(
    ("scheme", "loss", "rule"),
    [
        (PIPELINED_CR, BERNOULLI, "constant"),
        (PIPELINED_FR, BURSTS, "constant"),
        (SR_SGC, BERNOULLI, "constant"),
        (M_SGC, ["delay=none"], "constant"),
        (M_SGC, BURSTS, "scaled"),
        pytest.param(PIPELINED_CR, BURSTS, "scaled", marks=pytest.mark.slow),
        pytest.param(PIPELINED_FR, BERNOULLI, "scaled", marks=pytest.mark.slow),
    ],
    ids=["cr-bernoulli", "fr-bursts", "sr_sgc-bernoulli", "m_sgc-lossless",
         "m_sgc-bursts-scaled", "cr-bursts-scaled", "fr-bernoulli-scaled"],
)  # fmt: skip
def test_stale_pipeline_equals_the_stale_reference(tmp_path, scheme, loss, rule):
    cfg = compose_config(
        [*TINY, *scheme, "cluster.workers=4", f"train.rounds={JOBS}", *loss,
         "network.policy=all", f"train.stale_lr={rule}"]
    )  # fmt: skip
    got = trained_weights(cfg, tmp_path, in_process)
    decoded = decoded_per_round(tmp_path)
    assert sorted(j for jobs in decoded for j in jobs) == list(range(JOBS))

    records = read_metrics(tmp_path / "metrics.jsonl")
    rounds = [rec for rec in records if rec["kind"] == "round"]
    compute = np.array([rec["compute_s"] for rec in rounds])
    server = np.array([rec["server_time"] for rec in rounds])
    replay = replay_rounds(*build_protocol(cfg), compute, JOBS, server=server)
    assert [step.decoded for step in replay.rounds] == decoded  # independent decode rounds

    delays = staleness(decoded)
    assert max(delays) >= 1 and sum(d > 0 for d in delays) >= 2  # really stale
    assert list(report_staleness(records)) == delays  # the report's, from jobs_applied
    scaled = rule == "scaled"
    assert_same_weights(got, stale_reference(cfg, decoded, scaled), tol=TOL)
    for other in (stale_reference(cfg, decoded, not scaled), reference_weights(cfg)):
        with pytest.raises(AssertionError):  # the other rule and plain SGD are told apart
            assert_same_weights(got, other, tol=TOL)
