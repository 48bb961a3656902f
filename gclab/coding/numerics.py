"""Float64 numerics of decoding: residual checks, least squares, streams, result arrays.

The residual ``‖C·E_F − I‖`` that guards each decode (:data:`RESIDUAL_TOL`), least-squares
decoding weights, the ``m`` interleaved streams of a payload (and float pairs for complex
codes), and :class:`Outputs`, the decoder's pool of result arrays. The pass that applies
decoding weights to packets is :mod:`gclab.coding.sums`.
"""

from __future__ import annotations

import sys
from typing import ClassVar

import numpy as np

#: Largest tolerated ‖residual‖ of a decoding solution (computed in float64).
RESIDUAL_TOL = 1e-8


def least_squares_weights(encoding: np.ndarray, survivors: tuple[int, ...]) -> np.ndarray | None:
    """Decoding weights ``C[m, len(survivors)]`` of ``E`` (``[n, k, m]``) by least squares.

    ``None`` when the system is inconsistent (the survivors cannot decode); the caller's
    residual check (:meth:`LinearScheme.checked_weights`) judges the accuracy of the rest.
    """
    e = encoding[list(survivors)]  # [F, k, m]
    m = e.shape[2]
    a = e.transpose(1, 2, 0).reshape(-1, len(survivors))  # rows (j, u'), columns i
    target = np.tile(np.eye(m), (e.shape[1], 1))  # [(j, u'), u]
    # sum_i C[u,i] E[F_i, j, u'] = delta(u, u') for every part j
    weights = np.linalg.lstsq(a, target, rcond=None)[0].T
    if residual(encoding, survivors, weights) > 1e-6:
        return None
    return weights


def residual(encoding: np.ndarray, survivors: tuple[int, ...], weights: np.ndarray) -> float:
    """‖C·E_F − I‖ (max abs) of weights ``C`` for the rows ``F = survivors`` of ``E``."""
    e = encoding[list(survivors)]  # [F, k, m]
    got = np.einsum("ui,ijv->juv", weights, e)  # [k, m, m]
    want = np.broadcast_to(np.eye(e.shape[2]), got.shape)
    return float(np.max(np.abs(got - want)))


def pad_length(size: int, m: int) -> int:
    """Gradient length padded up to a multiple of ``m`` (streams of equal length)."""
    return -(-size // m) * m


def as_streams(vector: np.ndarray, m: int, pairs: bool = False) -> np.ndarray:
    """``[length, m]`` view of a real vector's ``m`` interleaved streams (zero-padded).

    With ``pairs`` consecutive floats ``(x, y)`` are read as one complex ``x + iy`` first
    (a view, no copy, when no padding is needed), for codes with a complex ``E``.
    """
    if pairs and vector.dtype not in (np.float32, np.float64):
        raise TypeError(f"float pairs need float32 or float64 payloads, not {vector.dtype}.")
    vector = np.ascontiguousarray(vector)
    width = 2 * m if pairs else m
    padded = pad_length(vector.size, width)
    if padded != vector.size:
        vector = np.concatenate([vector, np.zeros(padded - vector.size, dtype=vector.dtype)])
    if pairs:
        vector = vector.view(np.result_type(vector.dtype, np.complex64))
    return vector.reshape(-1, m)


class Outputs:
    """Result arrays of a decoder, reused once nothing but this pool refers to them.

    A fresh gradient-sized array costs about one more pass over it (the kernel zeroes each
    page on first touch), which is most of a decode that reads one packet per FR group.
    An array the caller or the decoder still holds, itself or through a view (a view keeps
    its base alive), is never handed out again: CPython's reference count tells. At most
    ``limit`` arrays are kept; beyond that, results are allocated as before.
    """

    #: The count of an array only the pool holds, as :meth:`take` sees it (the list, and
    #: whatever references the count itself takes on this Python version); measured once.
    idle: ClassVar[int]

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.arrays: list[np.ndarray] = []

    def _counts(self) -> list[int]:
        return [sys.getrefcount(array) for array in self.arrays]

    def take(self, size: int, dtype: type = np.float64) -> np.ndarray:
        """An uninitialised ``dtype`` array of ``size`` values that nobody else refers to."""
        for array, count in zip(self.arrays, self._counts()):
            if array.size == size and array.dtype == dtype and count <= self.idle:
                return array
        array = np.empty(size, dtype=dtype)
        if len(self.arrays) < self.limit:
            self.arrays.append(array)
        return array


def _idle_count() -> int:
    """:attr:`Outputs.idle`: the count :meth:`Outputs.take` sees for a pool's only array."""
    probe = Outputs(limit=1)
    probe.arrays.append(np.empty(0))
    return probe._counts()[0]


Outputs.idle = _idle_count()
