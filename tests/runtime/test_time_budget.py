"""``train.time_budget`` ends a run on the virtual clock; ``train.eval_subset`` evaluates
on a fixed subset of the test set, the last evaluation on all of it."""

import pytest

from gclab.app import run
from gclab.errors import ConfigError
from gclab.ml.evalset import subset_indices
from gclab.tracking.artifacts import read_metrics
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process

ROUNDS = ["train.rounds=40", "train.checkpoint_every=0"]


def test_a_run_ends_once_its_virtual_clock_passes_the_budget(tmp_path):
    cfg = compose_config([*TINY, *ROUNDS, "train.eval_every=10", "train.eval_subset=50"])
    full = run(cfg, tmp_path / "full", start_pool=in_process)
    records = read_metrics(tmp_path / "full" / "metrics.jsonl")
    clock = [r["virtual_time"] for r in records if r["kind"] == "round"]
    budget = clock[19]  # measured compute times vary: the cut run passes it near round 19
    cfg = compose_config(
        [*TINY, *ROUNDS, "train.eval_every=10", "train.eval_subset=50",
         f"train.time_budget={budget}"]
    )  # fmt: skip
    summary = run(cfg, tmp_path / "cut", start_pool=in_process)
    records = read_metrics(tmp_path / "cut" / "metrics.jsonl")
    clock = [r["virtual_time"] for r in records if r["kind"] == "round"]
    assert all(t < budget for t in clock[:-1]) and clock[-1] >= budget  # the first past it
    assert full["jobs"] == 40 and summary["jobs"] == len(clock) < 40
    assert summary["time_budget"] == budget and summary["total_virtual_time"] == clock[-1]
    evals = [r for r in records if r["kind"] == "eval"]
    last = len(clock) - 1
    assert evals[-1]["round"] == last and evals[-1]["test_images"] == 128  # every image
    assert all(e["test_images"] == 50 for e in evals[:-1])
    assert summary["test_accuracy"] == evals[-1]["test_accuracy"]


def test_periodic_evaluations_use_the_subset_and_the_last_the_whole_test_set(tmp_path):
    cfg = compose_config([*TINY, *ROUNDS, "train.eval_every=10", "train.eval_subset=50"])
    summary = run(cfg, tmp_path, start_pool=in_process)
    evals = [r for r in read_metrics(tmp_path / "metrics.jsonl") if r["kind"] == "eval"]
    assert [(e["round"], e["test_images"]) for e in evals] == [
        (9, 50), (19, 50), (29, 50), (39, 128)
    ]  # fmt: skip
    assert summary["eval_subset"] == 50 and summary["time_budget"] is None


def test_the_subset_is_fixed_whatever_the_run():
    first = subset_indices(10_000, 1000)
    assert first.equal(subset_indices(10_000, 1000)) and len(set(first.tolist())) == 1000
    assert bool((first[1:] > first[:-1]).all())
    assert subset_indices(10_000, 10).tolist() == sorted(subset_indices(10_000, 10).tolist())


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("train.time_budget=0", "train.time_budget"),
        ("train.time_budget=-3", "train.time_budget"),
        ("train.eval_subset=0", "train.eval_subset"),
        ("train.eval_subset=129", "train.eval_subset"),
    ],
)
def test_bad_budget_or_subset_is_one_sentence_before_anything_runs(tmp_path, override, key):
    with pytest.raises(ConfigError, match=key) as info:
        run(compose_config([*TINY, override]), tmp_path / "run", start_pool=in_process)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "run").exists()
