"""Numerical kernels of decoding: residual checks, least squares, streams, weighted sums.

Every decoder's float64 work is here: the residual ``‖C·E_F − I‖`` that guards each
decode (:data:`RESIDUAL_TOL`), least-squares decoding weights, the ``m`` interleaved
streams of a payload (and float pairs for complex codes), and :func:`combine_sums`, the
memory-bound pass that applies decoding weights to packets (BENCHMARKS.md, "Numbers
behind choices in the code"), and :func:`weighted_sum_kernel`, the compiled pass that forms
a one-shot decode's float32 result at memory speed.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np
from numba import njit

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


#: Stream positions per block of the blocked kernel: its float64 buffer stays in L1.
WEIGHTED_SUM_BLOCK = 512


@functools.cache
def weighted_sum_kernel(
    m: int, count: int, pairs: bool = False
) -> Callable[[tuple, np.ndarray, np.ndarray], None]:
    """Compiled ``out[j·m + u] = Σ_i C[u,i]·packet_i[j]`` for ``count`` packets, ``m`` streams.

    Called as ``kernel(packets, C, out)``: a tuple of float32 packets (complex64 for float
    pairs), ``C`` ``[m, count]`` in float64 (complex128) and ``out`` of ``m`` times a
    packet's length. Each result is accumulated in float64 (complex128) and rounded once on
    its write. ``m`` and ``count`` are constants of the compiled code, so the loops over
    them unroll. Three loop orders, each where it is fastest (BENCHMARKS.md, "Decoding at
    memory speed"):

    * *blocked* (real ``m = 1``): each packet in turn is added to a float64 buffer of
      :data:`WEIGHTED_SUM_BLOCK` positions, a vectorised loop; a one-stream sum of 16
      packets runs at 0.7–1.0× one in-place float32 pass;
    * *interleaved* (real ``m > 1``, float pairs up to 4 packets): each position's ``m``
      sums over all packets at once, then written in order; real ``m = 3`` codes run at
      1.9–2.5× that pass, where the blocked order takes 3.6–5.3×;
    * *blocked in real arithmetic* for float pairs from 5 packets on: real and imaginary
      parts in separate buffers, four packets per pass (15 packets of ``m = 2``: 1.4–3.0×,
      complex arithmetic 4.6–4.9×).

    One kernel per ``(m, count, pairs)`` and dtype, compiled on first use
    (:func:`compile_weighted_sum` compiles it ahead, before a clock starts).
    """
    block = WEIGHTED_SUM_BLOCK

    @njit(boundscheck=False, nogil=True)
    def interleaved(packets: tuple, weights: np.ndarray, out: np.ndarray) -> None:
        first = packets[0]
        for j in range(first.shape[0]):
            for u in range(m):
                total = weights[u, 0] * first[j]
                for i in range(1, count):
                    total += weights[u, i] * packets[i][j]
                out[j * m + u] = total

    @njit(boundscheck=False, nogil=True)
    def blocked(packets: tuple, weights: np.ndarray, out: np.ndarray) -> None:
        length = packets[0].shape[0]
        buffer = np.empty(block * m, dtype=weights.dtype)
        for lo in range(0, length, block):
            width = min(block, length - lo)
            first = packets[0][lo : lo + width]
            for t in range(width):
                for u in range(m):
                    buffer[t * m + u] = weights[u, 0] * first[t]
            for i in range(1, count):
                packet = packets[i][lo : lo + width]
                for t in range(width):
                    for u in range(m):
                        buffer[t * m + u] += weights[u, i] * packet[t]
            into = out[lo * m : (lo + width) * m]
            for t in range(width * m):
                into[t] = buffer[t]

    @njit(boundscheck=False, nogil=True)
    def blocked_pairs(packets: tuple, weights: np.ndarray, out: np.ndarray) -> None:
        length = packets[0].shape[0]
        real, imag = np.empty((m, block)), np.empty((m, block))
        into = out.view(np.float32)
        for lo in range(0, length, block):
            width = min(block, length - lo)
            real[:, :width] = 0.0
            imag[:, :width] = 0.0
            for i in range(0, count, 4):  # four packets per pass over the buffers; past
                j = min(i + 1, count - 1)  # the last, the last again at weight 0
                k = min(i + 2, count - 1)
                h = min(i + 3, count - 1)
                sj, sk, sh = 1.0 if j > i else 0.0, 1.0 if k > j else 0.0, 1.0 if h > k else 0.0
                f0 = packets[i][lo : lo + width].view(np.float32)
                f1 = packets[j][lo : lo + width].view(np.float32)
                f2 = packets[k][lo : lo + width].view(np.float32)
                f3 = packets[h][lo : lo + width].view(np.float32)
                for u in range(m):
                    w0, w1 = weights[u, i], sj * weights[u, j]
                    w2, w3 = sk * weights[u, k], sh * weights[u, h]
                    re, im = real[u], imag[u]
                    for t in range(width):
                        x0, y0, x1, y1 = f0[2 * t], f0[2 * t + 1], f1[2 * t], f1[2 * t + 1]
                        x2, y2, x3, y3 = f2[2 * t], f2[2 * t + 1], f3[2 * t], f3[2 * t + 1]
                        re[t] += (
                            w0.real * x0
                            - w0.imag * y0
                            + w1.real * x1
                            - w1.imag * y1
                            + w2.real * x2
                            - w2.imag * y2
                            + w3.real * x3
                            - w3.imag * y3
                        )
                        im[t] += (
                            w0.real * y0
                            + w0.imag * x0
                            + w1.real * y1
                            + w1.imag * x1
                            + w2.real * y2
                            + w2.imag * x2
                            + w3.real * y3
                            + w3.imag * x3
                        )
            for t in range(width):
                for u in range(m):
                    k = 2 * ((lo + t) * m + u)
                    into[k], into[k + 1] = real[u, t], imag[u, t]

    if pairs:
        return blocked_pairs if count > 4 else interleaved
    return blocked if m == 1 else interleaved


def compile_weighted_sum(weights: np.ndarray) -> None:
    """Compile :func:`weighted_sum_kernel` for decoding weights like ``weights``, so that no
    decode on a clock pays the compiler (about half a second per kernel)."""
    m, count = weights.shape
    pairs = np.iscomplexobj(weights)
    packet = np.zeros(1, np.complex64 if pairs else np.float32)
    out = np.empty(m, packet.dtype)
    weighted_sum_kernel(m, count, pairs)(
        (packet,) * count, weights.astype(np.complex128 if pairs else np.float64), out
    )


def combine(
    vectors: Sequence[np.ndarray],
    weights: np.ndarray,
    grad_size: int,
    outputs: Outputs | None = None,
    final: bool = False,
) -> np.ndarray:
    """Σ_i C[u,i]·vector_i for each stream u, interleaved back into one vector.

    The single-sum case of :func:`combine_sums` (a float64 result); ``outputs`` supplies
    the result array. ``final`` marks a sum nothing adds to any more (a decoded gradient,
    which the optimizer takes in float32): float32 vectors then give a float32 result,
    accumulated in float64 and rounded once, by :func:`weighted_sum_kernel`.
    """
    if final and all(v.dtype == np.float32 for v in vectors):
        return weighted_sum(vectors, weights, grad_size, outputs)
    return combine_sums([(vectors, weights)], grad_size, outputs=outputs)[0]


def weighted_sum(
    vectors: Sequence[np.ndarray],
    weights: np.ndarray,
    grad_size: int,
    outputs: Outputs | None = None,
) -> np.ndarray:
    """:func:`combine` of float32 vectors into a float32 result, by the compiled kernel."""
    pairs = np.iscomplexobj(weights)
    if pairs:
        vectors = [as_streams(v, 1, pairs=True)[:, 0] for v in vectors]
    vectors = tuple(np.ascontiguousarray(v) for v in vectors)  # one compiled layout
    weights = np.asarray(weights, dtype=np.complex128 if pairs else np.float64)
    m, count = weights.shape
    size = vectors[0].size * m * (2 if pairs else 1)
    flat = outputs.take(size, np.float32) if outputs is not None else np.empty(size, np.float32)
    out = flat.view(np.complex64) if pairs else flat
    weighted_sum_kernel(m, count, pairs)(vectors, weights, out)
    return flat[:grad_size]


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
