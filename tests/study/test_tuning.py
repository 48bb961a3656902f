"""A learning-rate sweep's verdict: the mean of each run's last whole-set evaluations, the
best rate per group, marked when it lies at the grid's edge."""

from __future__ import annotations

from pathlib import Path

import pytest

from gclab.report.runs import TRAIN, Run
from gclab.study.tuning import main, score, table


def run_of(lr: float, accuracies: list[float], rule: str = "constant", failed=False) -> Run:
    records = [{"kind": "eval", "round": i, "virtual_time": float(i), "test_accuracy": a}
               for i, a in enumerate(accuracies)]  # fmt: skip
    records.insert(1, {"kind": "eval", "round": 0, "virtual_time": 0.5, "test_accuracy": 0.99,
                       "decisive": False})  # a subset evaluation: not scored  # fmt: skip
    config = {"train": {"lr": lr, "pipeline": "stale", "stale_lr": rule},
              "scheme": {"_target_": "gclab.coding.sr_sgc.SRSGC"}}  # fmt: skip
    summary = None if failed else {"jobs": 10}
    return Run("0", Path("."), 0, {}, {}, config, TRAIN, summary, None, records)


def test_the_score_is_the_mean_of_the_last_whole_set_evaluations():
    assert score(run_of(0.1, [0.1, 0.2, 0.4, 0.6]), 2) == pytest.approx(0.5)
    assert score(run_of(0.1, [0.3]), 3) == pytest.approx(0.3)


def test_each_group_marks_its_best_rate_and_an_edge():
    runs = [run_of(0.025, [0.4, 0.5]), run_of(0.05, [0.5, 0.6]), run_of(0.1, [0.2, 0.3]),
            run_of(0.025, [0.5, 0.6], "scaled"), run_of(0.05, [0.4, 0.5], "scaled"),
            run_of(0.1, [0.1], "scaled", failed=True)]  # fmt: skip
    lines = table(runs, 2).splitlines()
    assert lines[2:5] == [
        "| SRSGC, pipeline=stale, stale_lr=constant | 0.025 | 0.4500 |  |",
        "| SRSGC, pipeline=stale, stale_lr=constant | 0.05 | 0.5500 | best |",
        "| SRSGC, pipeline=stale, stale_lr=constant | 0.1 | 0.2500 |  |",
    ]
    assert lines[5].endswith("| 0.025 | 0.5500 | best, at the grid's edge |")
    assert lines[7].endswith("| 0.1 | failed |  |")


def test_bad_arguments_fail_in_one_sentence(tmp_path, capsys):
    assert main([str(tmp_path), "--last", "0"]) == 2
    assert main([str(tmp_path), "--restore"]) == 2
    assert "needs an --archive folder" in capsys.readouterr().err
