"""One training run's records: metrics.jsonl, the tracker, summary.json and the checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from gclab.tracking.artifacts import (
    MetricsFile,
    atomic_write,
    load_checkpoint,
    read_metrics,
    save_checkpoint,
    write_summary,
)
from gclab.tracking.loggers import Logger


class RunRecorder:
    """Accumulates clocks and counters and writes every record to the file and the tracker."""

    def __init__(
        self,
        run_dir: Path,
        logger: Logger,
        target_accuracy: float | None,
        extra: dict[str, Any],
        config_text: str,
    ) -> None:
        self.run_dir = run_dir
        self.config_text = config_text  # the run's config, stored in checkpoints
        self.logger = logger
        self.metrics = MetricsFile(run_dir / "metrics.jsonl")
        self.target_accuracy = target_accuracy
        self.extra = extra  # scheme description etc., copied into the summary
        self.virtual_time = 0.0
        self.wall_time = 0.0
        self.decode_ms: list[float] = []
        self.decode_delays: list[int] = []  # rounds from a job's start to its decode
        self.waits = 0
        self.retransmissions = 0
        self.jobs = 0
        self.last_eval: dict[str, float] = {}
        self.time_to_target: float | None = None

    def _emit(self, record: dict[str, Any]) -> dict[str, Any]:
        self.metrics.write(record)
        self.logger.log({k: v for k, v in record.items() if not isinstance(v, list)})
        return record

    def round(
        self,
        r: int,
        outcome: Any,
        decoded: list[int],
        applied: list[int],
        decode_ms: float,
        train_loss: float,
        wall_seconds: float,
        compute: list[float],
        faults: dict[str, int],
    ) -> dict[str, Any]:
        """Record round ``r``: the protocol's outcome, jobs decoded and applied (in order).

        ``compute`` (each worker's measured compute seconds) goes to metrics.jsonl only:
        with it the simulator can replay the round exactly.
        """
        self.virtual_time += outcome.duration
        self.wall_time += wall_seconds
        self.waits += int(outcome.waited)
        self.retransmissions += int(outcome.retransmissions)
        self.jobs += len(applied)
        if decoded:
            self.decode_ms.append(decode_ms)
        self.decode_delays += [r - job for job in decoded]
        return self._emit(
            {
                "kind": "round",
                "round": r,
                "jobs_decoded": len(decoded),
                "jobs_applied": len(applied),
                "decode_delays": [r - job for job in decoded],
                "virtual_time": self.virtual_time,
                "wall_time": self.wall_time,
                "round_time": float(outcome.duration),
                "erasures": int(np.count_nonzero(outcome.erased)),
                "lost": int(np.count_nonzero(outcome.lost)),
                "late": int(np.count_nonzero(outcome.late)),
                "retransmissions": int(outcome.retransmissions),
                "waited": bool(outcome.waited),
                "decode_ms": decode_ms,
                "train_loss": train_loss,
                **faults,
                "compute_s": compute,
            }
        )

    def evaluation(self, r: int, accuracy: float, loss: float) -> None:
        if (
            self.target_accuracy is not None
            and self.time_to_target is None
            and accuracy >= self.target_accuracy
        ):
            self.time_to_target = self.virtual_time
        self.last_eval = {"test_accuracy": accuracy, "test_loss": loss}
        self._emit(
            {
                "kind": "eval",
                "round": r,
                "virtual_time": self.virtual_time,
                "wall_time": self.wall_time,
                **self.last_eval,
            }
        )

    #: Counters restored on resume (everything :meth:`summary` reads).
    STATE = (
        "virtual_time", "wall_time", "decode_ms", "decode_delays", "waits", "retransmissions",
        "jobs",
        "last_eval", "time_to_target",
    )  # fmt: skip

    def checkpoint(self, r: int, server: Any, protocol: Any) -> None:
        """Write ``checkpoint.pt`` atomically: the server's state and these counters."""
        save_checkpoint(
            self.run_dir / "checkpoint.pt",
            {
                **server.state_dict(),
                "round": r,
                "recorder": _plain({key: getattr(self, key) for key in self.STATE}),
                "protocol": _plain(
                    {
                        "clock": protocol.clock,
                        "waits": protocol.waits,
                        "retransmissions": protocol.retransmissions,
                    }
                ),
                "config": self.config_text,
            },
        )

    def resume(self, server: Any, protocol: Any) -> int:
        """Restore the last checkpoint; returns the first round to run.

        ``metrics.jsonl`` is cut back to the checkpoint's round, so a crash between a
        checkpoint and the next leaves neither duplicated nor missing rounds.
        """
        checkpoint = load_checkpoint(self.run_dir / "checkpoint.pt")
        server.load_state_dict(checkpoint)
        for key, value in checkpoint["recorder"].items():
            setattr(self, key, value)
        for key, value in checkpoint["protocol"].items():
            setattr(protocol, key, value)
        r = checkpoint["round"]
        self.metrics.close()
        kept = [rec for rec in read_metrics(self.metrics.path) if rec["round"] <= r]
        atomic_write(
            self.metrics.path,
            lambda tmp: tmp.write_text("".join(json.dumps(rec) + "\n" for rec in kept)),
        )
        self.metrics = MetricsFile(self.metrics.path)
        return r + 1

    def summary(self) -> dict[str, Any]:
        decode = np.asarray(self.decode_ms) if self.decode_ms else np.asarray([np.nan])
        summary = {
            **self.extra,
            "test_accuracy": self.last_eval.get("test_accuracy"),
            "test_loss": self.last_eval.get("test_loss"),
            "target_accuracy": self.target_accuracy,
            "time_to_target": self.time_to_target,
            "total_virtual_time": self.virtual_time,
            "total_wall_time": self.wall_time,
            "jobs": self.jobs,
            "decode_ms_mean": float(np.mean(decode)),
            "decode_ms_p95": float(np.percentile(decode, 95)),
            "decode_delay_mean": float(np.mean(self.decode_delays)) if self.decode_delays else None,
            "decode_delay_max": max(self.decode_delays, default=None),
            "waits": self.waits,
            "retransmissions": self.retransmissions,
        }
        write_summary(self.run_dir / "summary.json", summary)
        return summary

    def close(self, summary: dict[str, Any] | None, failed: bool) -> None:
        """Close the metrics file and the tracker (runs even when training failed)."""
        self.metrics.close()
        self.logger.finish(summary or {}, self.decode_ms, failed=failed)


def _plain(value: Any) -> Any:
    """Numpy scalars to Python numbers, so ``torch.load(weights_only=True)`` reads them."""
    return json.loads(json.dumps(value, default=lambda v: v.item()))
