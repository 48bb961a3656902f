"""``trace``: replay measured per-worker durations, rescaled to the scheme's load.

A trace is an ``.npz`` with ``durations`` (float64, workers × rounds, seconds) and,
optionally, ``load`` (the load it was recorded at; docs/design.md, "Time and network model").
Worker ``w`` in round ``r`` is delayed by

    durations[w, r] + (L − base_load)·slope        (clipped at 0)

where ``L`` is the scheme's load and ``base_load`` defaults to the trace's ``load``.
Runs larger than the trace follow ``beyond``: ``wrap`` replays worker ``w`` as trace
row ``w mod workers`` and round ``r`` as column ``r mod rounds``; ``error`` refuses
(before the run starts, via :meth:`Trace.check`). Replay is deterministic: the seed
does not enter.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import numpy as np

from gclab.errors import ConfigError
from gclab.network.base import DelayModel, non_negative


class Beyond(StrEnum):
    """What a run larger than its trace does (``beyond``)."""

    wrap = "wrap"  # replay the trace cyclically, in workers and in rounds
    error = "error"  # refuse the run before it starts


class Trace(DelayModel):
    """Trace replay; the file is loaded and checked when the model is built."""

    #: Measured durations include the workers' compute, rescaled by ``slope`` per unit load.
    computes = True

    def __init__(
        self,
        path: str | None = None,
        slope: float = 2.2,
        base_load: float | None = None,
        beyond: Beyond = Beyond.wrap,
    ) -> None:
        if path is None:
            raise ConfigError(
                "path is missing: a trace replay needs the path of an .npz trace.", param="path"
            )
        self.path = Path(path).expanduser().resolve()
        self.slope = non_negative("slope", slope)
        self.beyond = Beyond(beyond)
        self.durations, recorded = load_trace(self.path)
        if base_load is None:
            if recorded is None:
                raise ConfigError(
                    f"base_load is missing: trace {self.path} has no 'load' entry; "
                    "set base_load to the load it was recorded at.",
                    param="base_load",
                )
            base_load = recorded
        self.base_load = non_negative("base_load", base_load)

    def check(self, n: int, rounds: int) -> None:
        workers, length = self.durations.shape
        if self.beyond is Beyond.error and (n > workers or rounds > length):
            raise ConfigError(
                f"beyond=error but trace {self.path.name} has {workers} workers × {length} rounds "
                f"and the run needs {n} × {rounds}: use a larger trace or beyond=wrap.",
                param="beyond",
            )

    def delays(self, round: int, n: int, seed: int, load: float) -> np.ndarray:
        workers, length = self.durations.shape
        if self.beyond is Beyond.error and (n > workers or round >= length):
            self.check(n, round + 1)
        column = self.durations[np.arange(n) % workers, round % length]
        return np.maximum(column + (load - self.base_load) * self.slope, 0.0)

    def delays_by_load(self, rounds: int, n: int, seed: int, loads: np.ndarray) -> np.ndarray:
        workers, length = self.durations.shape
        if self.beyond is Beyond.error and (n > workers or rounds > length):
            self.check(n, rounds)
        columns = self.durations[np.arange(n) % workers][:, np.arange(rounds) % length].T
        shift = (np.asarray(loads, dtype=np.float64) - self.base_load) * self.slope
        out = np.add(columns[None], shift[:, None, None])
        return np.maximum(out, 0.0, out=out)


def load_trace(path: Path) -> tuple[np.ndarray, float | None]:
    """``(durations, recorded load or None)`` from an ``.npz``, or :class:`ConfigError`."""
    if not path.is_file():
        raise ConfigError(
            f"path={str(path)!r} is not a file: give the path of an .npz trace.", param="path"
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            entries = {key: data[key] for key in data.files}
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"path={str(path)!r} is not a readable .npz trace ({exc}).", param="path"
        ) from exc
    if "durations" not in entries:
        raise ConfigError(
            f"trace {path.name} has keys {sorted(entries)} "
            "but needs 'durations' (workers × rounds)."
        )
    durations = entries["durations"]
    if durations.ndim != 2 or 0 in durations.shape or not _real(durations):
        raise ConfigError(
            f"trace {path.name}: 'durations' has shape {durations.shape} and dtype "
            f"{durations.dtype} but must be a non-empty numeric workers × rounds array."
        )
    durations = durations.astype(np.float64)
    if not np.all(np.isfinite(durations)) or np.any(durations < 0):
        raise ConfigError(
            f"trace {path.name}: 'durations' must be finite and >= 0 "
            "(found NaN, inf or a negative)."
        )
    recorded = None
    if "load" in entries:
        load = entries["load"]
        if load.shape != () or not _real(load) or not np.isfinite(load):
            raise ConfigError(f"trace {path.name}: 'load' must be a finite number, not {load!r}.")
        recorded = float(load)
    durations.setflags(write=False)
    return durations, recorded


def _real(array: np.ndarray) -> bool:
    return np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
