"""Every run records the commit it ran from and its measured compute speed."""

import re

import numpy as np
import pytest

from gclab.app import run
from gclab.tracking.artifacts import read_metrics
from gclab.tracking.provenance import code_version, partition_seconds
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process


def test_partition_seconds_is_the_median_worker_round_over_its_partitions():
    records = [
        {"kind": "round", "compute_s": [0.2, 0.4, None]},
        {"kind": "eval", "compute_s": [9.0]},  # not a round
        {"kind": "round", "compute_s": [0.6, float("nan")]},
    ]
    assert partition_seconds(records, 2) == pytest.approx(0.2)  # median of 0.2, 0.4, 0.6
    assert partition_seconds([{"kind": "round", "compute_s": []}], 2) is None
    assert partition_seconds(records, 0) is None


def test_the_summary_records_the_commit_and_the_seconds_per_partition(tmp_path):
    cfg = compose_config([*TINY, "scheme=classic_fr", "scheme.s=1", "cluster.workers=4"])
    summary = run(cfg, tmp_path, start_pool=in_process)
    assert summary["commit"] == code_version()
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?|gclab .+", summary["commit"])
    compute = [c for r in read_metrics(tmp_path / "metrics.jsonl") if r["kind"] == "round"
               for c in r["compute_s"]]  # fmt: skip
    partitions = summary["load"] * summary["n"]  # 2 of classic_fr's 4 at s = 1
    assert partitions == 2
    assert summary["partition_seconds"] == pytest.approx(np.median(compute) / 2)
