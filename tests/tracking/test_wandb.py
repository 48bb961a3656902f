"""W&B logging checked against the real offline run file a training run writes."""

import pytest

from gclab.app import run
from gclab.tracking.artifacts import read_metrics
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process
from helpers.wandb_records import read_run


def test_offline_run_file_holds_config_metrics_histogram_and_summary(tmp_path):
    overrides = [o for o in TINY if not o.startswith("logger")]
    cfg = compose_config(
        [*overrides, "logger=wandb", "logger.mode=offline", "train.eval_every=2",
         "scheme=classic_fr", "scheme.s=1"]
    )  # fmt: skip
    summary = run(
        cfg, tmp_path, name="scheme=classic_fr", group="sweep-x", tags=["scheme:fr"],
        start_pool=in_process,
    )  # fmt: skip
    files = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1
    logged = read_run(files[0])
    assert logged["name"] == "scheme=classic_fr" and logged["group"] == "sweep-x"
    assert "scheme:fr" in logged["tags"]
    assert logged["config"]["scheme"]["s"] == 1 and logged["config"]["train"]["rounds"] == 4
    assert logged["exit_code"] == 0

    local = read_metrics(tmp_path / "metrics.jsonl")
    rounds = [h for h in logged["history"] if h.get("kind") == "round"]
    evals = [h for h in logged["history"] if h.get("kind") == "eval"]
    assert [h["round"] for h in rounds] == [r["round"] for r in local if r["kind"] == "round"]
    assert [h["test_accuracy"] for h in evals] == [
        r["test_accuracy"] for r in local if r["kind"] == "eval"
    ]
    assert all("virtual_time" in h and "wall_time" in h for h in rounds)
    for key in ("server_time", "bytes", "coverage"):  # what the clock charged, what it covered
        assert [h[key] for h in rounds] == [r[key] for r in local if r["kind"] == "round"], key
    assert all(h["server_time"] > 0 and h["bytes"] > 0 for h in rounds)
    assert logged["summary"]["decode_ms_histogram"]["_type"] == "histogram"
    assert not any("decode_ms_histogram" in h for h in logged["history"])
    for key in ("test_accuracy", "total_virtual_time", "decode_ms_mean", "decode_ms_p95",
                "waits", "retransmissions", "time_to_target", "bytes_sent",
                "server_time_total", "coverage_mean"):  # fmt: skip
        assert key in logged["summary"], key
        assert logged["summary"][key] == pytest.approx(summary[key]), key
