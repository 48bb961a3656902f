"""Numerical kernels of decoding: residual checks, least squares, streams, weighted sums.

Every decoder's float64 work is here: the residual ``‖C·E_F − I‖`` that guards each
decode (:data:`RESIDUAL_TOL`), least-squares decoding weights, the ``m`` interleaved
streams of a payload (and float pairs for complex codes), and :func:`combine_sums`, the
memory-bound pass that applies decoding weights to packets (BENCHMARKS.md, "Numbers
behind choices in the code").
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
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


#: Stream positions combined per pass (at most): ``vectors × chunk`` float64 values stay in cache.
COMBINE_CHUNK = 1 << 14

#: Float64 values per pass: the chunk is narrowed for many vectors (M-SGC reads n(W−1) and
#: more, n = 256 reads 241), so that ``vectors × chunk`` stays in cache (BENCHMARKS.md).
COMBINE_BLOCK = 1 << 17

Sum = tuple[Sequence[np.ndarray], np.ndarray]
"""``(vectors, weights C[m, len(vectors)])``: the streams ``Σ_i C[u,i]·vector_i``, u < m."""


class Outputs:
    """Float64 result arrays of a decoder, reused once nothing but this pool refers to them.

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

    def take(self, size: int) -> np.ndarray:
        """An uninitialised float64 array of ``size`` values that nobody else refers to."""
        for array, count in zip(self.arrays, self._counts()):
            if array.size == size and count <= self.idle:
                return array
        array = np.empty(size)
        if len(self.arrays) < self.limit:
            self.arrays.append(array)
        return array


def _idle_count() -> int:
    """:attr:`Outputs.idle`: the count :meth:`Outputs.take` sees for a pool's only array."""
    probe = Outputs(limit=1)
    probe.arrays.append(np.empty(0))
    return probe._counts()[0]


Outputs.idle = _idle_count()


def combine(
    vectors: Sequence[np.ndarray],
    weights: np.ndarray,
    grad_size: int,
    outputs: Outputs | None = None,
) -> np.ndarray:
    """Σ_i C[u,i]·vector_i for each stream u, interleaved back into one float64 vector.

    The single-sum case of :func:`combine_sums`; ``outputs`` supplies the result array.
    """
    return combine_sums([(vectors, weights)], grad_size, outputs=outputs)[0]


def combine_sums(
    sums: Sequence[Sum], grad_size: int, total: bool = False, outputs: Outputs | None = None
) -> list[np.ndarray]:
    """Each sum ``Σ_i C[u,i]·vector_i`` (streams interleaved) as a float64 vector, in one pass.

    Memory-bound, so it reads every vector exactly once: chunk by chunk the vectors
    (float32 packets or float64 values) are widened into a cache-resident float64 block
    and one small matrix product per sum writes its ``m`` streams, interleaved into the
    result (float64 accumulation, no gradient-sized temporaries). Unit weights (FR groups,
    uncoded, M-SGC's D1 chunks) skip the product: the widened rows are added. Complex
    weights read every vector as pairs of floats (see :class:`LinearScheme`). With
    ``total`` (real weights, ``m = 1``) the sums' sum is appended, added while each chunk
    is in cache: a decoder that keeps per-group results (pipelined FR) saves a pass per
    group. ``outputs`` supplies the result arrays (else they are allocated).
    """
    if not sums:
        raise ValueError("combine_sums needs at least one sum.")
    pairs = any(np.iscomplexobj(weights) for _, weights in sums)
    if total and (pairs or any(np.shape(weights)[0] != 1 for _, weights in sums)):
        raise ValueError("combine_sums(total=True) adds real single-stream sums only.")
    dtype = np.complex128 if pairs else np.float64
    plans = []
    for vectors, weights in sums:
        if pairs:
            vectors = [as_streams(v, 1, pairs=True)[:, 0] for v in vectors]
        weights = np.asarray(weights, dtype=dtype)
        unit = weights.shape[0] == 1 and bool(np.all(weights == 1))
        plans.append((vectors, weights, unit))
    length = plans[0][0][0].size  # stream positions (pairs: complex numbers)
    rows = sum(len(vectors) for vectors, _, _ in plans) * (2 if pairs else 1)
    chunk = max(1024, min(COMBINE_CHUNK, COMBINE_BLOCK // rows))
    streams = [weights.shape[0] for _, weights, _ in plans] + ([1] if total else [])
    results = []
    for m in streams:
        size = length * m * (2 if pairs else 1)
        flat = outputs.take(size) if outputs is not None else np.empty(size)
        results.append(flat.view(dtype).reshape(length, m))
    block = np.empty((max(len(v) for v, _, _ in plans), min(chunk, length)), dtype=dtype)
    scratch = np.empty((max(streams), block.shape[1]), dtype=dtype)
    for lo in range(0, length, chunk):
        hi = min(lo + chunk, length)
        for (vectors, weights, unit), out in zip(plans, results):
            part, into = block[: len(vectors), : hi - lo], out[lo:hi]
            if unit:  # Σ vectors: widen the first into the result, add the others
                into[:, 0] = vectors[0][lo:hi]
                for i, vector in enumerate(vectors[1:]):
                    part[i] = vector[lo:hi]
                    into[:, 0] += part[i]
                continue
            for i, vector in enumerate(vectors):
                part[i] = vector[lo:hi]
            if len(weights) == 1:
                np.matmul(weights, part, out=into.T)
            elif not pairs:
                np.matmul(part.T, weights.T, out=into)
            else:  # [m, chunk] in cache, then interleaved: a complex [chunk, K]·[K, m] is slow
                product = np.matmul(weights, part, out=scratch[: len(weights), : hi - lo])
                for u, stream in enumerate(product):
                    into[:, u] = stream
        if total:
            into = results[-1][lo:hi]
            into[:] = results[0][lo:hi]
            for out in results[1:-1]:
                into += out[lo:hi]
    return [out.reshape(-1).view(np.float64)[:grad_size] for out in results]
