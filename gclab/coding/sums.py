"""The pass of every decode: a weighted sum of packets, compiled.

A decode applies decoding weights ``C[u, i]`` to the vectors it reads (packets, and for
the pipelined codes the kept values of earlier jobs) and writes the ``m`` interleaved
streams ``Σ_i C[u,i]·vector_i`` (:class:`WeightedSum`, weights prepared once for many
passes; :func:`combine`, once). Each vector is read once; the sums are
accumulated in float64 in registers or in buffers that stay in L1, so the float64
accumulation costs no memory traffic, and written once in the vectors' dtype (float32
packets give a float32 result, rounded once). Complex weights (codes on float pairs,
:class:`~gclab.coding.linear.LinearScheme`) act on the pairs ``x + iy``.

Three loop orders, each where it measured fastest (BENCHMARKS.md, "Decoding against the
packets that arrive"):

* at most :data:`FEW` vectors: position by position, every stream's sum over the vectors
  in registers and written in order (:func:`_few`; the vector count is a constant of the
  compiled code, so its loop unrolls);
* more: block of positions by block into a float64 buffer (:func:`_rows`), then written
  (:func:`_write`): the buffer rows four, two and one at a time, four vectors a pass
  (:func:`_four_rows`, :func:`_two_rows`, :func:`_one_row`), so each value read is
  converted to float64 once for a group's rows and a pass's weights stay in registers;
  complex weights ``a + ib`` as two real sums ``A = Σ a_i·f_i`` and ``B = Σ b_i·f_i``
  over the floats, combined once per block as ``A + J·B`` with ``J(x, y) = (−y, x)`` on
  each pair, position by position so that the interleaved streams are written in order;
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

#: The kernels' float64 arithmetic may fuse a multiply and an add into one FMA (a term
#: rounded once, not twice): 15% off a ``cce_cr`` decode at the small CNN, which is bound
#: by its arithmetic (four real multiply-adds per float read at m = 2).
CONTRACT = {"contract"}


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


@njit(boundscheck=False, nogil=True, cache=True, fastmath=CONTRACT)
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
def _input(inputs, k, start, size, like, zero):
    """Values ``start .. start+size`` of vector ``k``; past the last vector, ``size`` zeros."""
    if k < inputs.size:
        return _view(inputs[k], start, size, like)
    return _view(zero.ctypes.data, 0, size, like)


@njit(boundscheck=False, nogil=True, cache=True)
def _four_inputs(inputs, i, start, size, like, zero):
    """The vectors ``i .. i+3`` of a pass (:func:`_input`: zeros past the last one)."""
    return (
        _input(inputs, i, start, size, like, zero), _input(inputs, i + 1, start, size, like, zero),
        _input(inputs, i + 2, start, size, like, zero),
        _input(inputs, i + 3, start, size, like, zero),
    )  # fmt: skip


@njit(boundscheck=False, nogil=True, cache=True)
def _four_weights(weights, r, i):
    """Row ``r``'s weights of the vectors ``i .. i+3`` (0 past the last vector)."""
    b = weights.shape[1]
    return (
        weights[r, i], weights[r, i + 1] if i + 1 < b else 0.0,
        weights[r, i + 2] if i + 2 < b else 0.0, weights[r, i + 3] if i + 3 < b else 0.0,
    )  # fmt: skip


@njit(boundscheck=False, nogil=True, cache=True, inline="always")
def _at(f, q):
    """Position ``q`` of the four vectors ``f``, as float64."""
    return np.float64(f[0][q]), np.float64(f[1][q]), np.float64(f[2][q]), np.float64(f[3][q])


@njit(boundscheck=False, nogil=True, cache=True, inline="always", fastmath=CONTRACT)
def _dot(w, x):
    """``Σ_k w_k·x_k`` over four terms, in order."""
    return w[0] * x[0] + w[1] * x[1] + w[2] * x[2] + w[3] * x[3]


@njit(boundscheck=False, nogil=True, cache=True, fastmath=CONTRACT)
def _four_rows(buf, r, inputs, weights, start, size, like, zero):
    """Rows ``r .. r+3`` of :func:`_rows`: four vectors a pass, each value read once and
    converted once for the four rows, 16 weights in registers. The last pass is padded
    with zero vectors rather than finished in passes of two and one vector, each of which
    would read and write the rows once more."""
    ra, rb, rc, rd = buf[r], buf[r + 1], buf[r + 2], buf[r + 3]
    for i in range(0, inputs.size, 4):
        f = _four_inputs(inputs, i, start, size, like, zero)
        a, b = _four_weights(weights, r, i), _four_weights(weights, r + 1, i)
        c, d = _four_weights(weights, r + 2, i), _four_weights(weights, r + 3, i)
        if i == 0:
            for q in range(size):
                x = _at(f, q)
                ra[q], rb[q], rc[q], rd[q] = _dot(a, x), _dot(b, x), _dot(c, x), _dot(d, x)
        else:
            for q in range(size):
                x = _at(f, q)
                ra[q] += _dot(a, x)
                rb[q] += _dot(b, x)
                rc[q] += _dot(c, x)
                rd[q] += _dot(d, x)


@njit(boundscheck=False, nogil=True, cache=True, fastmath=CONTRACT)
def _two_rows(buf, r, inputs, weights, start, size, like, zero):
    """Rows ``r`` and ``r+1`` of :func:`_rows`, as :func:`_four_rows` does four (a
    generic kernel over a tuple of rows ran 1.2–1.5× slower than these two)."""
    ra, rb = buf[r], buf[r + 1]
    for i in range(0, inputs.size, 4):
        f = _four_inputs(inputs, i, start, size, like, zero)
        a, b = _four_weights(weights, r, i), _four_weights(weights, r + 1, i)
        if i == 0:
            for q in range(size):
                x = _at(f, q)
                ra[q], rb[q] = _dot(a, x), _dot(b, x)
        else:
            for q in range(size):
                x = _at(f, q)
                ra[q] += _dot(a, x)
                rb[q] += _dot(b, x)


@njit(boundscheck=False, nogil=True, cache=True, fastmath=CONTRACT)
def _one_row(row, inputs, weights, start, size, like):
    """One row of :func:`_rows` (``weights`` its row): four vectors a pass, then two, then
    one, so no pass does a multiply-add on zeros (one row is memory-bound: padding a
    five-vector sum with three zero vectors made it 1.3× slower)."""
    b, i = inputs.size, 0
    while i < b:
        f0 = _view(inputs[i], start, size, like)
        if b - i >= 4:
            f1 = _view(inputs[i + 1], start, size, like)
            f2 = _view(inputs[i + 2], start, size, like)
            f3 = _view(inputs[i + 3], start, size, like)
            w0, w1, w2, w3 = weights[i], weights[i + 1], weights[i + 2], weights[i + 3]
            if i == 0:
                for q in range(size):
                    row[q] = w0 * f0[q] + w1 * f1[q] + w2 * f2[q] + w3 * f3[q]
            else:
                for q in range(size):
                    row[q] += w0 * f0[q] + w1 * f1[q] + w2 * f2[q] + w3 * f3[q]
            i += 4
        elif b - i >= 2:
            f1 = _view(inputs[i + 1], start, size, like)
            w0, w1 = weights[i], weights[i + 1]
            if i == 0:
                for q in range(size):
                    row[q] = w0 * f0[q] + w1 * f1[q]
            else:
                for q in range(size):
                    row[q] += w0 * f0[q] + w1 * f1[q]
            i += 2
        else:
            w0 = weights[i]
            if i == 0:
                for q in range(size):
                    row[q] = w0 * f0[q]
            else:
                for q in range(size):
                    row[q] += w0 * f0[q]
            i += 1


@njit(boundscheck=False, nogil=True, cache=True)
def _rows(buf, inputs, weights, start, size, shape, like, zero):
    """``buf[r, :size] = Σ_i W[r,i]·vector_i[start : start+size]`` for every row ``r``.

    Rows four at a time (:func:`_four_rows`), then two (:func:`_two_rows`), then one
    (:func:`_one_row`): a value read is converted to float64 once for the group's rows and
    each pass reads and writes a buffer row once per four vectors; the first pass assigns
    (zeroing the rows and then adding made ``cce_cr``'s decode 1.4× slower, and a
    two-packet sum 1.6×). The weights of
    a pass are locals, so they stay in registers. (Every row in one generic loop over
    positions kept the weights in memory and ran 2.3× slower.) ``shape`` makes the row
    count a constant of the compiled code.
    """
    rows, r = len(shape[0]) * len(shape[1]), 0
    while rows - r >= 4:
        _four_rows(buf, r, inputs, weights, start, size, like, zero)
        r += 4
    if rows - r >= 2:
        _two_rows(buf, r, inputs, weights, start, size, like, zero)
        r += 2
    if r < rows:
        _one_row(buf[r], inputs, weights[r], start, size, like)


@njit(boundscheck=False, nogil=True, cache=True)
def _write(buf, address, lo, width, shape, like):
    """The block's ``m`` streams from ``buf`` into the result at ``address``, interleaved,
    from position ``lo``, rounded once to ``like``'s dtype.

    Real weights: row ``u`` is stream ``u``. Float pairs: rows ``2u`` and ``2u + 1`` are
    ``A`` and ``B`` (module docstring) and stream ``u`` is ``A + J·B``. Position by
    position, every stream's pair in turn, so the result is written in order (stream by
    stream, each writing every ``m``-th pair, compiles to scatter stores, several times
    slower).
    """
    m, step = len(shape[0]), len(shape[1])
    out = _view(address, lo * m * step, width * m * step, like)
    if step == 1:
        for t in range(width):
            for u in range(m):
                out[t * m + u] = buf[u, t]
    else:
        for t in range(width):
            for u in range(m):
                re, im = buf[2 * u], buf[2 * u + 1]
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
    zero = np.zeros(BLOCK * step, like.dtype)
    for lo in range(0, length, BLOCK):
        width = min(BLOCK, length - lo)
        _rows(buf, inputs, weights, lo * step, width * step, shape, like, zero)
        _write(buf, output, lo, width, shape, like)


@njit(boundscheck=False, nogil=True, cache=True, fastmath=CONTRACT)
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


#: Empty arrays whose dtype tells a kernel what it reads, by payload dtype: the floats, and
#: the complex numbers their pairs form (:func:`_few` on float pairs).
_LIKE = {
    np.dtype(real): (np.empty(0, real), np.empty(0, pair))
    for real, pair in ((np.float32, np.complex64), (np.float64, np.complex128))
}


class WeightedSum:
    """``Σ_i C[u,i]·vector_i`` for each stream ``u``, with the weights ``C[m, vectors]``
    prepared once for the compiled pass.

    Building one picks the kernel (module docstring) and lays the weights out for it;
    calling it (:meth:`__call__`) runs the pass. A decoder keeps one per cached erasure
    pattern, so a steady round pays for the pass and no more, where :func:`combine`
    prepares the weights on every call (a noticeable share of a decode at the small CNN).
    """

    def __init__(self, weights: np.ndarray) -> None:
        weights = np.asarray(weights)
        if weights.ndim != 2 or not weights.shape[1]:
            raise ValueError(f"weights of shape {weights.shape}: need [m, vectors], vectors >= 1.")
        self.weights = weights
        m, count = weights.shape
        self.pairs = np.iscomplexobj(weights)
        self.order: np.ndarray | None = None  # the vectors in stream order (_streams)
        self.ends: np.ndarray | None = None
        if _one_per_vector(weights):
            stream = np.argmax(weights != 0, axis=0)
            self.order = np.argsort(stream, kind="stable")
            self.ends = np.cumsum(np.bincount(stream, minlength=m))
            self.kernel = _streams
            self.prepared = weights[stream[self.order], self.order].astype(np.float64)
            self.shape = ((0,) * m, (0,))
        elif count <= FEW:
            self.kernel = _few
            self.prepared = weights.astype(np.complex128 if self.pairs else np.float64)
            self.shape = ((0,) * m, (0,) * count)
        else:
            if self.pairs:  # rows 2u, 2u + 1: the real and imaginary parts of stream u's weights
                weights = np.stack([weights.real, weights.imag], axis=1).reshape(2 * m, -1)
            self.kernel = _blocks
            self.prepared = np.ascontiguousarray(weights, dtype=np.float64)
            self.shape = ((0,) * m, (0, 0) if self.pairs else (0,))

    def __call__(
        self, vectors: Sequence[np.ndarray], grad_size: int, outputs: Outputs | None = None
    ) -> np.ndarray:
        """The streams interleaved, ``grad_size`` long, from one pass over ``vectors``.

        The result has the vectors' dtype (float32 or float64; any other is widened to
        float64), accumulated in float64 and rounded once. Every vector has the same
        length; complex weights read them as float pairs (an odd length is padded with a
        zero float, a copy). ``outputs`` supplies the result array (else it is allocated).
        """
        m, count = self.weights.shape
        if len(vectors) != count:
            raise ValueError(
                f"weights of shape {self.weights.shape} for {len(vectors)} vectors: "
                "need [m, vectors]."
            )
        dtype = vectors[0].dtype
        if any(v.dtype != dtype for v in vectors):
            dtype = np.result_type(*(v.dtype for v in vectors))
        dtype = dtype if dtype in _LIKE else np.dtype(np.float64)
        vectors = [np.ascontiguousarray(v, dtype=dtype) for v in vectors]
        if len({v.size for v in vectors}) > 1:
            raise ValueError(f"vectors of lengths {sorted({v.size for v in vectors})}: need one.")
        if self.pairs and vectors[0].size % 2:
            vectors = [np.append(v, dtype.type(0)) for v in vectors]
        size = vectors[0].size
        result = outputs.take(size * m, dtype) if outputs is not None else np.empty(size * m, dtype)
        inputs = np.array([_address(v) for v in vectors], dtype=np.intp)
        output, length = _address(result), size // 2 if self.pairs else size
        real, pair = _LIKE[dtype]
        if self.kernel is _streams:
            _streams(inputs[self.order], self.prepared, self.ends, output, size, self.shape, real)
        elif self.kernel is _few:  # complex weights act on complex numbers
            _few(inputs, self.prepared, output, length, self.shape, pair if self.pairs else real)
        else:
            _blocks(inputs, self.prepared, output, length, self.shape, real)
        return result[:grad_size]


def combine(
    vectors: Sequence[np.ndarray],
    weights: np.ndarray,
    grad_size: int,
    outputs: Outputs | None = None,
) -> np.ndarray:
    """``Σ_i C[u,i]·vector_i`` for each stream ``u`` (``weights`` is ``C[m, len(vectors)]``),
    the streams interleaved, ``grad_size`` long: :class:`WeightedSum` of weights used once."""
    return WeightedSum(weights)(vectors, grad_size, outputs)


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
