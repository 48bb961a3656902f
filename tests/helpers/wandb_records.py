"""Read the records of an offline W&B run file (``run-<id>.wandb``) back, for tests.

The file is W&B's transaction log: a 7-byte header, then LevelDB-log framing (32 KiB
blocks; each chunk = crc32 (4) + length (2) + type (1): full, first, middle, last)
around serialized ``wandb_internal_pb2.Record`` protobufs. W&B ships no public reader,
so this short one lets tests check what a run really wrote, with no mocks.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2

BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[wandb_internal_pb2.Record]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    out, pending, pos = [], b"", HEADER
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # block trailer padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if length == 0 and kind == 0:
            pos += left
            continue
        if pos + HEADER + length > len(data):  # still being written
            break
        chunk = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind in (FULL, FIRST):
            pending = chunk
        else:
            pending += chunk
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
    return out


def _key(item: Any) -> str:
    return item.key or ".".join(item.nested_key)


def finished_records(path: Path, timeout: float = 30.0) -> list[wandb_internal_pb2.Record]:
    """The file's records once its exit record is in.

    wandb-core writes the transaction log from its own process and can still be flushing
    it when ``run.finish()`` has returned (a CI run once read a file with no run record
    yet), so wait for the exit record rather than trusting the first read.
    """
    deadline = time.monotonic() + timeout
    while True:
        found = records(path)
        if any(r.WhichOneof("record_type") == "exit" for r in found):
            return found
        assert time.monotonic() < deadline, f"{path} has no exit record after {timeout} s"
        time.sleep(0.2)


def read_run(path: Path) -> dict[str, Any]:
    """The run's name, group, tags, config, history rows, final summary and exit code."""
    run: dict[str, Any] = {"history": [], "summary": {}, "exit_code": None}
    for record in finished_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run["name"], run["group"] = record.run.display_name, record.run.run_group
            run["tags"] = list(record.run.tags)
            run["config"] = {i.key: json.loads(i.value_json) for i in record.run.config.update}
        elif kind == "history":
            run["history"].append({_key(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "summary":
            run["summary"].update(
                {_key(i): json.loads(i.value_json) for i in record.summary.update}
            )
        elif kind == "exit":
            run["exit_code"] = record.exit.exit_code
    return run
