"""RunRecorder: what reaches the tracker, and when, around checkpoints and resumes."""

from pathlib import Path

import numpy as np
import pytest

from gclab.network.base import DelayModel
from gclab.network.protocol import NetworkConfig, RoundProtocol
from gclab.tracking.artifacts import read_metrics
from gclab.tracking.loggers import Logger
from gclab.tracking.run import RunRecorder


class Recording(Logger):
    def __init__(self) -> None:
        self.logged: list[tuple[int, int]] = []  # (step, round)

    def log(self, record: dict, step: int) -> None:
        self.logged.append((step, record["round"]))

    def finish(self, summary, decode_ms, failed=False) -> None:
        pass


class Server:
    """The part of the parameter server a checkpoint reads."""

    next_job = 0

    def state_dict(self) -> dict:
        return {"models": [], "next_job": self.next_job}

    def load_state_dict(self, state: dict) -> None:
        self.next_job = state["next_job"]


class Outcome:
    duration, waited, retransmissions, bytes, server_time = 1.0, False, 0, 8.0, 0.25
    erased = lost = late = np.zeros(2, dtype=bool)


def recorder(run_dir: Path, logger: Logger, checkpointed: bool = True) -> RunRecorder:
    return RunRecorder(run_dir, logger, None, {}, "seed: 0\n", checkpointed=checkpointed)


def rounds(rec: RunRecorder, start: int, stop: int) -> None:
    for r in range(start, stop):
        rec.round(r, Outcome(), [r], [r], 0.1, 2.0, 0.01, [0.0, 0.0], {"failed": 0})


def protocol() -> RoundProtocol:
    return RoundProtocol(NetworkConfig(), DelayModel(), 2, 0)


def test_records_reach_the_tracker_once_a_checkpoint_covers_them(tmp_path: Path) -> None:
    logger = Recording()
    rec = recorder(tmp_path, logger)
    rounds(rec, 0, 3)
    assert logger.logged == []  # metrics.jsonl has them, the tracker waits
    assert [r["round"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [0, 1, 2]
    rec.checkpoint(2, Server(), protocol(), None)
    assert logger.logged == [(0, 0), (1, 1), (2, 2)]
    rounds(rec, 3, 5)  # a crash now: rounds 3 and 4 never reach the tracker
    rec.close(None, failed=True)
    assert logger.logged == [(0, 0), (1, 1), (2, 2)]

    logger = Recording()
    resumed = recorder(tmp_path, logger)
    start, coding = resumed.resume(Server(), protocol())
    assert (start, coding) == (3, None)
    rounds(resumed, 3, 5)
    resumed.checkpoint(4, Server(), protocol(), None)
    resumed.close({}, failed=False)
    assert logger.logged == [(3, 3), (4, 4)]  # the steps continue the first segment's
    assert [r["round"] for r in read_metrics(tmp_path / "metrics.jsonl")] == list(range(5))


@pytest.mark.parametrize("checkpointed", [False, True])
def test_without_a_checkpoint_to_resume_from_every_record_is_sent(
    tmp_path: Path, checkpointed: bool
) -> None:
    logger = Recording()
    rec = recorder(tmp_path, logger, checkpointed)
    rounds(rec, 0, 2)
    assert len(logger.logged) == (0 if checkpointed else 2)  # no checkpoints: sent at once
    rec.close(None, failed=True)  # nothing can resume this run: the tracker gets it all
    assert logger.logged == [(0, 0), (1, 1)]
