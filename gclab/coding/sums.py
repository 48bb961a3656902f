"""The memory-bound pass of every decode: a weighted sum of packets, compiled.

A decode applies decoding weights ``C[u, i]`` to the vectors it reads (packets, and for
the pipelined codes the kept values of earlier jobs) and writes the ``m`` interleaved
streams ``Σ_i C[u,i]·vector_i`` (:func:`combine`). Each vector is read once; the sums are
accumulated in float64 in registers or in buffers that stay in L1, so the float64
accumulation costs no memory traffic, and written once in the vectors' dtype (float32
packets give a float32 result, rounded once). Complex weights (codes on float pairs,
:class:`~gclab.coding.linear.LinearScheme`) act on the pairs ``x + iy``.

Three loop orders, each where it measured fastest (BENCHMARKS.md, "Decoding against the
packets that arrive"):

* at most :data:`FEW` vectors: position by position, every stream's sum over the vectors
  in registers and written in order (:func:`_few`; the vector count is a constant of the
  compiled code, so its loop unrolls);
* more: block of positions by block, four vectors a pass added to each buffer row, a
  loop that vectorises (:func:`_rows`), then written (:func:`_write`); complex weights
  ``a + ib`` as two real sums ``A = Σ a_i·f_i`` and ``B = Σ b_i·f_i`` over the floats,
  combined once per block as ``A + J·B`` with ``J(x, y) = (−y, x)`` on each pair;
* several streams, each vector in exactly one (CCE FR codes: a group's ``m`` packets
  are its ``m`` streams): each buffer row from its own vectors only (:func:`_streams`),
  one multiply-add per value read where the other orders do ``m``.

One sum per pass: forming several sums (a pipelined FR code's groups) and their total in
one pass over interleaved blocks was 2.3× slower than a pass per sum, each reading a few
vectors and writing one.

Vectors reach the kernels as addresses (:func:`_address`): neither the number of vectors
(beyond :data:`FEW`) nor a read-only flag (arrays from Ray's object store) is part of a
compiled signature. With a tuple of arrays as the argument, numba compiled a kernel per
vector count and again for read-only packets, on the decode's clock (24 s for 244
read-only packets at n = 256). The kernels are cached on disk; :func:`compile_sums`
loads or compiles a decoder's kernel before any clock runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import carray, njit, types
from numba.extending import intrinsic

from gclab.coding.numerics import Outputs

#: Stream positions per block: a float64 buffer row of this length stays in L1.
BLOCK = 512

#: One sum of at most this many vectors takes the position-by-position kernel.
FEW = 4


@intrinsic
def _pointer(typingctx, address):
    """The integer ``address`` as a pointer, for :func:`numba.carray`."""
    signature = types.voidptr(types.intp)

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(types.voidptr))

    return signature, codegen


@njit(boundscheck=False, nogil=True, cache=True)
def _view(address: int, start: int, size: int, like: np.ndarray) -> np.ndarray:
    """``size`` values of ``like``'s dtype from value ``start`` of the vector at ``address``."""
    return carray(_pointer(address + start * like.itemsize), size, like.dtype)


@njit(boundscheck=False, nogil=True, cache=True)
def _few(inputs, weights, output, length, shape, like):
    """``out[t·m + u] = Σ_i C[u,i]·vector_i[t]`` position by position, for ``length``
    positions of ``like``'s dtype (complex for float pairs). ``shape`` holds ``m`` and the
    vector count (at most :data:`FEW`) as tuple lengths, constants of the compiled code."""
    m, count = len(shape[0]), len(shape[1])
    last = count - 1
    f = (
        _view(inputs[0], 0, length, like), _view(inputs[min(1, last)], 0, length, like),
        _view(inputs[min(2, last)], 0, length, like), _view(inputs[min(3, last)], 0, length, like),
    )  # fmt: skip
    out = _view(output, 0, length * m, like)
    for t in range(length):
        for u in range(m):
            total = weights[u, 0] * f[0][t]
            for i in range(1, count):
                total += weights[u, i] * f[i][t]
            out[t * m + u] = total


@njit(boundscheck=False, nogil=True, cache=True)
def _rows(buf, inputs, weights, start, size, shape, like):
    """``buf[r, :size] = Σ_i W[r,i]·vector_i[start : start+size]`` for every row ``r``.

    Four vectors a pass (then two, then one), so a buffer row is read and written once per
    four vectors; the first pass assigns (zeroing the buffer and then adding made a
    two-packet sum 1.6× slower). Row by row, with the row's four weights in registers: a
    loop over positions with five pointers, which vectorises. (Every row in one loop over
    positions, reading each value once, kept the weights in memory and ran 2.3× slower
    for ``cce_cr`` m = 2 and 1.4× for three real streams at ResNet-18.) ``shape`` makes
    the row count a constant of the compiled code.
    """
    rows, b = len(shape[0]) * len(shape[1]), inputs.size
    i = 0
    while i < b:
        f0 = _view(inputs[i], start, size, like)
        if b - i >= 4:
            f1 = _view(inputs[i + 1], start, size, like)
            f2 = _view(inputs[i + 2], start, size, like)
            f3 = _view(inputs[i + 3], start, size, like)
            for r in range(rows):
                row = buf[r]
                w0, w1 = weights[r, i], weights[r, i + 1]
                w2, w3 = weights[r, i + 2], weights[r, i + 3]
                if i == 0:
                    for q in range(size):
                        row[q] = w0 * f0[q] + w1 * f1[q] + w2 * f2[q] + w3 * f3[q]
                else:
                    for q in range(size):
                        row[q] += w0 * f0[q] + w1 * f1[q] + w2 * f2[q] + w3 * f3[q]
            i += 4
        elif b - i >= 2:
            f1 = _view(inputs[i + 1], start, size, like)
            for r in range(rows):
                row = buf[r]
                w0, w1 = weights[r, i], weights[r, i + 1]
                if i == 0:
                    for q in range(size):
                        row[q] = w0 * f0[q] + w1 * f1[q]
                else:
                    for q in range(size):
                        row[q] += w0 * f0[q] + w1 * f1[q]
            i += 2
        else:
            for r in range(rows):
                row = buf[r]
                w0 = weights[r, i]
                if i == 0:
                    for q in range(size):
                        row[q] = w0 * f0[q]
                else:
                    for q in range(size):
                        row[q] += w0 * f0[q]
            i += 1


@njit(boundscheck=False, nogil=True, cache=True)
def _write(buf, address, lo, width, shape, like):
    """The block's ``m`` streams from ``buf`` into the result at ``address``, interleaved,
    from position ``lo``, rounded once to ``like``'s dtype.

    Real weights: row ``u`` is stream ``u``. Float pairs: rows ``2u`` and ``2u + 1`` are
    ``A`` and ``B`` (module docstring) and stream ``u`` is ``A + J·B``.
    """
    m, step = len(shape[0]), len(shape[1])
    out = _view(address, lo * m * step, width * m * step, like)
    if step == 1:
        for t in range(width):
            for u in range(m):
                out[t * m + u] = buf[u, t]
    else:
        for u in range(m):
            re, im = buf[2 * u], buf[2 * u + 1]
            for t in range(width):
                q = 2 * (t * m + u)
                out[q] = re[2 * t] - im[2 * t + 1]
                out[q + 1] = re[2 * t + 1] + im[2 * t]


@njit(boundscheck=False, nogil=True, cache=True)
def _blocks(inputs, weights, output, length, shape, like):
    """The sum block of positions by block: formed in the buffer by :func:`_rows`, then
    written. ``shape`` holds ``m`` streams of ``step`` floats a position (2: float pairs)
    as tuple lengths, constants of the compiled code; ``weights`` has a row per buffer row."""
    m, step = len(shape[0]), len(shape[1])
    buf = np.empty((m * step, BLOCK * step))
    for lo in range(0, length, BLOCK):
        width = min(BLOCK, length - lo)
        _rows(buf, inputs, weights, lo * step, width * step, shape, like)
        _write(buf, output, lo, width, shape, like)


@njit(boundscheck=False, nogil=True, cache=True)
def _streams(inputs, weights, ends, output, length, shape, like):
    """:func:`_blocks` for real weights with one nonzero per vector: stream ``u`` is
    ``Σ weights[i]·vector_i`` over ``i`` in ``ends[u−1] .. ends[u]`` (the vectors sorted
    by stream), formed one vector a pass into buffer row ``u``, then written. Each
    position costs one multiply-add per vector, where :func:`_blocks` does ``m``."""
    m = len(shape[0])
    buf = np.empty((m, BLOCK))
    for lo in range(0, length, BLOCK):
        width = min(BLOCK, length - lo)
        for u in range(m):
            row, a = buf[u], 0 if u == 0 else ends[u - 1]
            first, w = _view(inputs[a], lo, width, like), weights[a]
            for q in range(width):
                row[q] = w * first[q]
            for i in range(a + 1, ends[u]):
                f, w = _view(inputs[i], lo, width, like), weights[i]
                for q in range(width):
                    row[q] += w * f[q]
        _write(buf, output, lo, width, shape, like)


def _one_per_vector(weights: np.ndarray) -> bool:
    """Real weights of several streams where each vector feeds exactly one (CCE FR codes)."""
    nonzero = weights != 0
    return (
        weights.shape[0] > 1
        and not np.iscomplexobj(weights)
        and bool(np.all(nonzero.sum(axis=0) == 1) and np.all(nonzero.any(axis=1)))
    )


def _address(vector: np.ndarray) -> int:
    """The address of a contiguous vector's first value."""
    return vector.__array_interface__["data"][0]


def combine(
    vectors: Sequence[np.ndarray],
    weights: np.ndarray,
    grad_size: int,
    outputs: Outputs | None = None,
) -> np.ndarray:
    """``Σ_i C[u,i]·vector_i`` for each stream ``u`` (``weights`` is ``C[m, len(vectors)]``),
    the streams interleaved, ``grad_size`` long.

    One pass over the vectors (module docstring). The result has the vectors' dtype
    (float32 or float64; any other is widened to float64), accumulated in float64 and
    rounded once. Every vector has the same length; complex weights read them as float
    pairs (an odd length is padded with a zero float, a copy). ``outputs`` supplies the
    result array (else it is allocated).
    """
    weights = np.asarray(weights)
    if weights.ndim != 2 or weights.shape[1] != len(vectors) or not len(vectors):
        raise ValueError(
            f"weights of shape {weights.shape} for {len(vectors)} vectors: need [m, vectors]."
        )
    pairs = np.iscomplexobj(weights)
    dtype = np.result_type(*(v.dtype for v in vectors))
    dtype = dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)
    vectors = [np.ascontiguousarray(v, dtype=dtype) for v in vectors]
    if len({v.size for v in vectors}) > 1:
        raise ValueError(f"vectors of lengths {sorted({v.size for v in vectors})}: need one.")
    if pairs and vectors[0].size % 2:
        vectors = [np.append(v, dtype.type(0)) for v in vectors]
    m, size, step = weights.shape[0], vectors[0].size, 2 if pairs else 1
    result = outputs.take(size * m, dtype) if outputs is not None else np.empty(size * m, dtype)
    addresses = np.array([_address(v) for v in vectors], dtype=np.intp)
    if _one_per_vector(weights):
        stream = np.argmax(weights != 0, axis=0)
        order = np.argsort(stream, kind="stable")
        _streams(
            addresses[order], weights[stream[order], order].astype(np.float64),
            np.cumsum(np.bincount(stream, minlength=m)), _address(result), size,
            ((0,) * m, (0,)), np.empty(0, dtype),
        )  # fmt: skip
    elif len(vectors) <= FEW:
        kind = np.result_type(dtype, np.complex64) if pairs else dtype
        _few(
            addresses, weights.astype(np.complex128 if pairs else np.float64), _address(result),
            size // step, ((0,) * m, (0,) * len(vectors)), np.empty(0, kind),
        )  # fmt: skip
    else:
        if pairs:  # rows 2u, 2u + 1: the real and imaginary parts of stream u's weights
            weights = np.stack([weights.real, weights.imag], axis=1).reshape(2 * m, -1)
        _blocks(
            addresses, np.ascontiguousarray(weights, dtype=np.float64), _address(result),
            size // step, ((0,) * m, (0,) * step), np.empty(0, dtype),
        )  # fmt: skip
    return result[:grad_size]


def compile_sums(weights: np.ndarray, dtype: type = np.float32) -> None:
    """Load (or compile) the kernels that decoding weights like ``weights`` (``[m, vectors]``)
    take on ``dtype`` payloads, so that no decode on a clock pays the compiler.

    Losses change how many vectors a decode reads, and every count up to :data:`FEW` is a
    kernel of its own: all of them up to ``vectors`` are loaded, and the blocked kernel
    (any count) when ``vectors`` exceeds :data:`FEW`.
    """
    m, count = np.shape(weights)
    step = 2 if np.iscomplexobj(weights) else 1
    kind = np.asarray(weights).dtype
    if _one_per_vector(np.asarray(weights)):
        pattern = (np.asarray(weights) != 0).astype(np.float64)
        combine([np.zeros(1, dtype) for _ in range(count)], pattern, m)
    for used in (*range(1, min(count, FEW) + 1), *((count,) if count > FEW else ())):
        combine([np.zeros(step, dtype) for _ in range(used)], np.ones((m, used), kind), step * m)
