"""One training run's records: metrics.jsonl, the tracker, summary.json and the checkpoint.

A resumed run continues from its last checkpoint: metrics.jsonl is cut back to it and
the rounds after it run again. The tracker (W&B) cannot take records back, so when
checkpoints are written it gets each record only once a checkpoint covers it: a run
continued after a crash then holds every round once, in the same tracker run. Records
are numbered by their line in metrics.jsonl (the tracker's step), so a resumed segment
continues the numbering. After a crash the rounds since the last checkpoint are in
metrics.jsonl only, until the resumed run logs them again.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from gclab.tracking.artifacts import (
    MetricsFile,
    atomic_write,
    load_checkpoint,
    read_metrics,
    save_checkpoint,
    to_arrays,
    to_tensors,
    write_summary,
)
from gclab.tracking.loggers import Logger
from gclab.tracking.provenance import partition_seconds


class RunRecorder:
    """Accumulates clocks and counters and writes every record to the file and the tracker."""

    def __init__(
        self,
        run_dir: Path,
        logger: Logger,
        target_accuracy: float | None,
        extra: dict[str, Any],
        config_text: str,
        checkpointed: bool = True,
    ) -> None:
        self.run_dir = run_dir
        self.config_text = config_text  # the run's config, stored in checkpoints
        self.logger = logger
        self.metrics = MetricsFile(run_dir / "metrics.jsonl")
        #: Whether checkpoints are written: then records wait for one before the tracker.
        self.checkpointed = checkpointed
        self.unsent: list[tuple[int, dict[str, Any]]] = []  # (step, record)
        self.step = 0  # line of the next record in metrics.jsonl
        self.target_accuracy = target_accuracy
        self.extra = extra  # scheme description etc., copied into the summary
        self.virtual_time = 0.0
        self.wall_time = 0.0
        self.decode_ms: list[float] = []
        self.decode_delays: list[int] = []  # rounds from a job's start to its decode
        self.waits = 0
        self.retransmissions = 0
        self.bytes_sent = 0.0
        self.server_time = 0.0
        self.jobs = 0
        self.coverage: list[float] = []  # per round run
        self.last_eval: dict[str, float] = {}
        #: Virtual time of each model's first decisive evaluation at or above the target.
        self.reached: list[float | None] = []
        self.time_to_target: float | None = None  # every model has reached the target
        self.time_to_first: float | None = None  # the first model has

    def _emit(self, record: dict[str, Any]) -> dict[str, Any]:
        self.metrics.write(record)
        self.unsent.append(
            (self.step, {k: v for k, v in record.items() if not isinstance(v, list)})
        )
        self.step += 1
        if not self.checkpointed:
            self._send()
        return record

    def _send(self) -> None:
        """Hand the records not sent yet to the tracker."""
        for step, record in self.unsent:
            self.logger.log(record, step)
        self.unsent.clear()

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
        server_ms: float = math.nan,
        coverage: float = 1.0,
        worker: list[float] | None = None,
        timeline: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Record round ``r``: the protocol's outcome, jobs decoded and applied (in order).

        ``compute`` (each worker's measured compute seconds) goes to metrics.jsonl only:
        with it the simulator can replay the round exactly. On the wall clock, where
        ``compute`` is when each worker's result came back, ``worker`` is the seconds each
        worker measured itself (``cluster.compute_time``), recorded as ``worker_s``: what
        the virtual clock would have been given, and ``timeline`` is when the driver and
        each worker reached each phase of the round (:mod:`gclab.runtime.timeline`).
        ``server_ms`` is the measured decode and optimizer steps, whether or not the clock
        charged them (``server_time`` is what it charged), so a replay can charge them
        later. ``coverage`` is the
        fraction of the batch gradient recovered for the jobs the round decoded (1 when
        exact; below with ``network.recovery=partial``).
        """
        self.coverage.append(float(coverage))
        self.virtual_time += outcome.duration
        self.wall_time += wall_seconds
        self.waits += int(outcome.waited)
        self.retransmissions += int(outcome.retransmissions)
        self.bytes_sent += float(outcome.bytes)
        self.server_time += float(outcome.server_time)
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
                "server_time": float(outcome.server_time),
                "bytes": float(outcome.bytes),
                "erasures": int(np.count_nonzero(outcome.erased)),
                "lost": int(np.count_nonzero(outcome.lost)),
                "late": int(np.count_nonzero(outcome.late)),
                "retransmissions": int(outcome.retransmissions),
                "waited": bool(outcome.waited),
                "decode_ms": decode_ms,
                "server_ms": server_ms,
                "coverage": float(coverage),
                "train_loss": train_loss,
                **faults,
                "compute_s": compute,
                **({} if worker is None else {"worker_s": worker}),
                **({} if timeline is None else {"timeline": timeline}),
            }
        )

    def unconfirmed(self, accuracies: list[float]) -> bool:
        """Whether a model that has not reached the target is at or above it in
        ``accuracies`` (one per model): a subset evaluation a whole-set one must confirm."""
        target = self.target_accuracy
        if target is None:
            return False
        reached = self.reached or [None] * len(accuracies)
        return any(a >= target and t is None for a, t in zip(accuracies, reached))

    def evaluation(
        self,
        r: int,
        accuracies: list[float],
        losses: list[float],
        images: int | None,
        decisive: bool = True,
    ) -> None:
        """Record an evaluation of every model after round ``r`` on ``images`` test images
        (None: not known, as in a replay of a run recorded before evaluations counted
        them). A ``decisive`` one marks each model at or above the target reached; the
        target is reached once every model has (``time_to_target``), the first model's
        time beside it (``time_to_first``)."""
        if not self.reached:
            self.reached = [None] * len(accuracies)
        target = self.target_accuracy
        if decisive and target is not None:
            for m, accuracy in enumerate(accuracies):
                if self.reached[m] is None and accuracy >= target:
                    self.reached[m] = self.virtual_time
            times = [t for t in self.reached if t is not None]
            if times and self.time_to_first is None:
                self.time_to_first = min(times)
            if len(times) == len(self.reached) and self.time_to_target is None:
                self.time_to_target = max(times)
        self.last_eval = {
            "test_accuracy": float(np.mean(accuracies)),
            "test_loss": float(np.mean(losses)),
        }
        models = {"model_accuracy": accuracies, "model_loss": losses} if len(accuracies) > 1 else {}
        self._emit(
            {
                "kind": "eval",
                "round": r,
                "virtual_time": self.virtual_time,
                "wall_time": self.wall_time,
                **self.last_eval,
                **models,
                "test_images": images,
                "decisive": decisive,
            }
        )

    #: Counters restored on resume (everything :meth:`summary` reads).
    STATE = (
        "virtual_time", "wall_time", "decode_ms", "decode_delays", "waits", "retransmissions",
        "bytes_sent", "server_time", "jobs", "coverage",
        "last_eval", "reached", "time_to_target", "time_to_first",
    )  # fmt: skip

    def checkpoint(self, r: int, server: Any, protocol: Any, coding: dict | None) -> None:
        """Write ``checkpoint.pt`` atomically, then send the records it covers to the tracker.

        It holds the server's state, the protocol's, these counters and ``coding``: what
        the coding scheme carries into the next rounds (decoder, kept packets, the
        workers' encoders; ``None`` after the last round), numpy arrays stored as tensors.
        """
        save_checkpoint(
            self.run_dir / "checkpoint.pt",
            {
                **server.state_dict(),
                "round": r,
                "recorder": _plain({key: getattr(self, key) for key in self.STATE}),
                "protocol": _plain(protocol.state_dict()),
                "config": self.config_text,
                "coding": to_tensors(coding),
            },
        )
        self._send()

    def resume(self, server: Any, protocol: Any) -> tuple[int, dict | None]:
        """Restore the last checkpoint: the first round to run, and its coding state.

        ``metrics.jsonl`` is cut back to the checkpoint's round, so a crash between a
        checkpoint and the next leaves neither duplicated nor missing rounds.
        """
        checkpoint = load_checkpoint(self.run_dir / "checkpoint.pt")
        server.load_state_dict(checkpoint)
        for key, value in checkpoint["recorder"].items():
            setattr(self, key, value)
        protocol.load_state_dict(checkpoint["protocol"])
        r = checkpoint["round"]
        self.metrics.close()
        kept = [rec for rec in read_metrics(self.metrics.path) if rec["round"] <= r]
        atomic_write(
            self.metrics.path,
            lambda tmp: tmp.write_text("".join(json.dumps(rec) + "\n" for rec in kept)),
        )
        self.metrics = MetricsFile(self.metrics.path)
        self.step = len(kept)
        return r + 1, to_arrays(checkpoint["coding"])

    def summary(self) -> dict[str, Any]:
        decode = np.asarray(self.decode_ms) if self.decode_ms else np.asarray([np.nan])
        partitions = self.extra.get("load", 0) * self.extra.get("n", 0)
        summary = {
            **self.extra,
            "partition_seconds": partition_seconds(read_metrics(self.metrics.path), partitions),
            "test_accuracy": self.last_eval.get("test_accuracy"),
            "test_loss": self.last_eval.get("test_loss"),
            "target_accuracy": self.target_accuracy,
            "time_to_target": self.time_to_target,
            "time_to_first": self.time_to_first,
            "total_virtual_time": self.virtual_time,
            "total_wall_time": self.wall_time,
            "jobs": self.jobs,
            "decode_ms_mean": float(np.mean(decode)),
            "decode_ms_p95": float(np.percentile(decode, 95)),
            "decode_delay_mean": float(np.mean(self.decode_delays)) if self.decode_delays else None,
            "decode_delay_max": max(self.decode_delays, default=None),
            "waits": self.waits,
            "retransmissions": self.retransmissions,
            "bytes_sent": self.bytes_sent,
            "server_time_total": self.server_time,
            "coverage_mean": float(np.mean(self.coverage)) if self.coverage else None,
        }
        write_summary(self.run_dir / "summary.json", summary)
        return summary

    def close(self, summary: dict[str, Any] | None, failed: bool) -> None:
        """Close the metrics file and the tracker (runs even when training failed).

        Records after the last checkpoint of a failed run stay out of the tracker: a
        resumed run logs them again. Without a checkpoint nothing can resume the run,
        so they are sent.
        """
        self.metrics.close()
        if not (self.run_dir / "checkpoint.pt").is_file():
            self._send()
        self.logger.finish(summary or {}, self.decode_ms, failed=failed)


def _plain(value: Any) -> Any:
    """Numpy scalars to Python numbers, so ``torch.load(weights_only=True)`` reads them."""
    return json.loads(json.dumps(value, default=lambda v: v.item()))
