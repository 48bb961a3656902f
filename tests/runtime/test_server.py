"""The parameter server: job order, staleness, ``train.stale_lr``; stopping at the target."""

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info

from gclab.app import build, run
from gclab.errors import DivergedError
from gclab.ml import gradients as ml_gradients
from gclab.runtime import server as server_module
from gclab.runtime.server import ParameterServer, worker_setup
from gclab.tracking.artifacts import load_checkpoint, read_metrics
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process

PIPELINED = [*TINY, "scheme=pipelined_cr", "scheme.s=1", "scheme.T=2", "train.momentum=0"]


def server_for(extra: list[str]) -> tuple[ParameterServer, int]:
    plan, _ = build(compose_config([*PIPELINED, *extra]))
    return ParameterServer(plan), plan.batch_size


def gradients(server: ParameterServer, jobs: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(server.num_params) for _ in range(jobs)]


@pytest.mark.parametrize(
    ("rule", "weights"), [("constant", [1, 1, 1]), ("scaled", [1, 1 / 3, 1 / 2])]
)
def test_jobs_apply_in_order_weighted_by_their_staleness(rule, weights):
    """Rounds 0-2 start jobs 0-2 on the initial weights; job 2 decodes first, then 0, then 1.

    Job 0 is applied fresh; job 1 after one update it did not see (staleness 1); job 2
    after two (staleness 2). With momentum 0 and no weight decay each step is
    ``-lr · weight · g / batch``.
    """
    server, batch = server_for([f"train.stale_lr={rule}", "train.weight_decay=0"])
    start = server.models[0].state_vector().clone()
    g = gradients(server, 3)
    for job in range(3):
        server.start(job)
    assert server.submit(2, g[2]) == []  # waits for jobs 0 and 1
    assert server.submit(0, g[0]) == [0]
    assert server.staleness(1) == 1
    assert server.submit(1, g[1]) == [1, 2]
    lr = server.optimizers[0].param_groups[0]["lr"]
    step = sum(w * gi for w, gi in zip([weights[0], weights[2], weights[1]], g))
    want = start[: server.num_params] - lr * torch.from_numpy(step / batch).float()
    got = server.models[0].state_vector()[: server.num_params]
    assert torch.allclose(got, want, atol=1e-6)


def test_interleaved_jobs_are_never_stale():
    server, _ = server_for(["train.pipeline=interleaved", "train.stale_lr=scaled"])
    g = gradients(server, 4)
    for job in range(3):
        server.start(job)
    assert server.submit(0, g[0]) == [0]
    server.start(3)  # job 3 trains model 0 again, on top of job 0
    assert [server.staleness(j) for j in (1, 2, 3)] == [0, 0, 0]
    assert server.submit(2, g[2]) + server.submit(1, g[1]) + server.submit(3, g[3]) == [1, 2, 3]


def test_checkpoint_keeps_the_staleness_of_jobs_in_flight():
    server, _ = server_for(["train.stale_lr=scaled"])
    for job in range(2):
        server.start(job)
    server.submit(0, gradients(server, 1)[0])
    restored, _ = server_for(["train.stale_lr=scaled"])
    restored.load_state_dict(server.state_dict())
    assert restored.next_job == 1 and restored.staleness(1) == 1


def test_evaluation_runs_on_every_core_with_the_numbers_of_one_thread(monkeypatch):
    """Three interleaved models evaluated on the cores the driver may use (here: 2, the
    driver's own 1 thread restored after) give what one thread gives, and another batch
    size the same accuracy."""
    plan, _ = build(compose_config([*PIPELINED, "train.pipeline=interleaved"]))
    server, (_, _, normalizer), data = ParameterServer(plan), worker_setup(plan), plan.data
    for k, model in enumerate(server.models):  # three different models
        model.load_state_vector(model.state_vector() * (1 + k / 10))
    threads = []

    def spy(*args, **kwargs):
        threads.append(torch.get_num_threads())
        return ml_gradients.evaluate(*args, **kwargs)

    monkeypatch.setattr(server_module, "evaluate", spy)
    monkeypatch.setattr(server_module, "usable_cores", lambda: 2)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        results = server.evaluate(data, normalizer)
        assert threads == [2, 2, 2] and torch.get_num_threads() == 1
        one = [
            ml_gradients.evaluate(m.model, data.test_x, data.test_y, normalizer, batch_size)
            for m in server.models for batch_size in (250, 7)
        ]  # fmt: skip
    finally:
        torch.set_num_threads(before)
    assert [a for a, _ in one[::2]] == [a for a, _ in one[1::2]]
    # a batch of 7 may take another conv kernel: the logits round differently
    assert [l for _, l in one[::2]] == pytest.approx([l for _, l in one[1::2]], rel=1e-6)
    assert results == one[::2]
    assert len({l for _, l in one[::2]}) == 3  # the models differ


def test_run_stops_at_the_first_evaluation_that_reaches_the_target(tmp_path):
    cfg = compose_config(
        [*TINY, "train.rounds=40", "train.eval_every=2", "train.target_accuracy=0.2",
         "train.stop_at_target=true"]
    )  # fmt: skip
    summary = run(cfg, tmp_path, start_pool=in_process)
    records = read_metrics(tmp_path / "metrics.jsonl")
    evals = [r for r in records if r["kind"] == "eval"]
    assert [e["test_accuracy"] >= 0.2 for e in evals] == [False] * (len(evals) - 1) + [True]
    assert records[-1] == evals[-1] and evals[-1]["round"] < 39  # nothing after it
    assert summary["time_to_target"] == evals[-1]["virtual_time"]
    assert summary["jobs"] == evals[-1]["round"] + 1 < summary["num_jobs"] == 40
    assert load_checkpoint(tmp_path / "checkpoint.pt")["next_job"] == summary["jobs"]


@pytest.mark.parametrize("threads", [1, 2])
def test_decodes_run_on_the_drivers_blas_threads(tmp_path, monkeypatch, threads):
    """The driver's BLAS pools get ``cluster.server_threads`` threads for the whole loop
    (a spinning pool would put load on the clock), and their own count again after."""
    seen = []
    decode = server_module.ParameterServer.submit

    def spy(self, job, gradient):
        seen.extend(p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas")
        return decode(self, job, gradient)

    monkeypatch.setattr(server_module.ParameterServer, "submit", spy)
    before = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    cfg = compose_config([*TINY, "train.rounds=3", f"cluster.server_threads={threads}"])
    run(cfg, tmp_path, start_pool=in_process)
    assert before and seen and set(seen) == {threads}
    assert [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"] == before


def test_a_subset_crossing_is_confirmed_on_the_whole_test_set_for_every_model(
    tmp_path, monkeypatch
):
    """train.confirm_target: a subset evaluation at or above the target is repeated on the
    whole set at once; only whole-set evaluations mark a model reached, the run reaches the
    target when every model has (time_to_target) and stops there, the first model's time
    beside it (time_to_first)."""
    # per evaluation round: (subset accuracies, whole-set accuracies) of the two models
    script = {
        1: ([0.1, 0.1], None),
        3: ([0.7, 0.2], [0.55, 0.2]),  # model 0 crosses on the subset only: not reached
        5: ([0.7, 0.2], [0.65, 0.2]),  # now confirmed: model 0 reached
        7: ([0.3, 0.8], [0.3, 0.61]),  # model 1 confirmed; model 0's dip does not undo it
    }

    def scripted(self, data, normalizer, subset=None):
        subset_acc, whole_acc = script[self.next_job - 1]
        return [(a, 1.0) for a in (subset_acc if subset is not None else whole_acc)]

    monkeypatch.setattr(server_module.ParameterServer, "evaluate", scripted)
    cfg = compose_config(
        [*TINY, "train.rounds=40", "train.eval_every=2", "train.eval_subset=16",
         "train.target_accuracy=0.6", "train.stop_at_target=true", "train.confirm_target=true",
         "train.pipeline=interleaved", "train.models=2"]
    )  # fmt: skip
    summary = run(cfg, tmp_path, start_pool=in_process)
    evals = [r for r in read_metrics(tmp_path / "metrics.jsonl") if r["kind"] == "eval"]
    assert [(e["round"], e["test_images"], e["decisive"]) for e in evals] == [
        (1, 16, False), (3, 16, False), (3, 128, True), (5, 16, False), (5, 128, True),
        (7, 16, False), (7, 128, True),
    ]  # fmt: skip
    assert evals[-1]["model_accuracy"] == [0.3, 0.61]
    assert summary["time_to_first"] == evals[4]["virtual_time"]
    assert summary["time_to_target"] == evals[6]["virtual_time"] > summary["time_to_first"]
    assert summary["jobs"] == 8


def test_a_run_whose_weights_turn_non_finite_stops_saying_it_diverged(tmp_path):
    cfg = compose_config([*TINY, "train.rounds=6", "train.lr=1e30", "train.momentum=0"])
    with pytest.raises(DivergedError, match=r"training diverged: after \d+ jobs \(round \d+\) "
                       r"the weights hold non-finite values; lower the learning rate "
                       r"\(train.lr 1e\+30\)\.$"):  # fmt: skip
        run(cfg, tmp_path, start_pool=in_process)
