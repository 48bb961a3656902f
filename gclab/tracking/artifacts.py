"""The files a run leaves in its Hydra run directory, written so a crash never corrupts them."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch


def atomic_write(path: Path, write) -> None:
    """Call ``write(tmp_path)`` then rename over ``path``: readers see old or new, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/inf; null reads back unambiguously
    return value


class MetricsFile:
    """``metrics.jsonl``: one JSON record per line, flushed as written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (lives as long as the run)

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps({k: _jsonable(v) for k, v in record.items()}) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """All records of a ``metrics.jsonl``."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    text = json.dumps({k: _jsonable(v) for k, v in summary.items()}, indent=2) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def save_checkpoint(path: Path, checkpoint: dict[str, Any]) -> None:
    """``torch.save`` through a temporary file (loadable with ``weights_only=True``)."""
    atomic_write(path, lambda tmp: torch.save(checkpoint, tmp))


def load_checkpoint(path: Path, mmap: bool = False) -> dict[str, Any]:
    """Read a checkpoint (``weights_only=True``); ``mmap`` maps tensors, reading none."""
    return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)


def to_tensors(tree: Any, memo: dict[int, torch.Tensor] | None = None) -> Any:
    """Numpy arrays inside dicts, lists, tuples and sets as tensors, for a checkpoint.

    ``torch.load(weights_only=True)`` reads tensors but not numpy arrays; the coding
    state (packets, decoder tables, encoder accumulators) is numpy. An array met twice
    becomes one tensor, so it is stored once. :func:`to_arrays` undoes it.
    """
    memo = {} if memo is None else memo
    if isinstance(tree, np.ndarray):
        if id(tree) not in memo:  # read-only arrays (decoded values) are copied: torch writes
            memo[id(tree)] = torch.from_numpy(tree if tree.flags.writeable else tree.copy())
        return memo[id(tree)]
    if isinstance(tree, np.generic):
        return tree.item()
    if isinstance(tree, dict):
        return {k: to_tensors(v, memo) for k, v in tree.items()}
    if isinstance(tree, (list, tuple, set)):
        return type(tree)(to_tensors(v, memo) for v in tree)
    return tree


def to_arrays(tree: Any) -> Any:
    """The inverse of :func:`to_tensors`: every tensor back to a numpy array."""
    if isinstance(tree, torch.Tensor):
        return tree.numpy()
    if isinstance(tree, dict):
        return {k: to_arrays(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple, set)):
        return type(tree)(to_arrays(v) for v in tree)
    return tree
