"""Test vectors 5–6 of docs/design.md (CCE-GC) and CCE properties."""

from __future__ import annotations

from fractions import Fraction as Q

import numpy as np
import pytest

from gclab.coding.cce import CCECR, CCEFR
from gclab.coding.evaluation import EvaluationCode, search_nodes
from gclab.errors import ConfigError
from helpers.coding import decode, packets, partials, relative_error

#: Vector 5's worker rows for n=4, s=1, m=2, θ = 0..3: coefficients of (g_j^1, g_j^2), j = 0..3.
ROWS = np.array([
    [-1, -1, -2, -4, -3, -9, 0, 0],
    [0, 0, -1, -3, -2, -8, 1, 1],
    [1, 3, 0, 0, -1, -5, 2, 4],
    [2, 8, 1, 5, 0, 0, 3, 9],
], dtype=float)  # fmt: skip
#: Vector 5's decode rows (survivors ascending) per straggler: (row for g¹, row for g²).
DECODE = {
    3: ([Q(-3, 2), 2, Q(-1, 2)], [Q(1, 2), -1, Q(1, 2)]),
    0: ([Q(-5, 2), 4, Q(-3, 2)], [Q(1, 2), -1, Q(1, 2)]),
    1: ([Q(-5, 6), Q(3, 2), Q(-2, 3)], [Q(1, 6), Q(-1, 2), Q(1, 3)]),
    2: ([Q(-4, 3), Q(3, 2), Q(-1, 6)], [Q(1, 3), Q(-1, 2), Q(1, 6)]),
}


def test_vector_5_cce_cr_reference_nodes() -> None:
    code = EvaluationCode(np.arange(4.0), 1, 2)
    ours = code.encoding.reshape(4, -1)
    first = [np.flatnonzero(ours[w])[0] for w in range(4)]
    scale = np.array([ROWS[w, i] / ours[w, i] for w, i in enumerate(first)])
    np.testing.assert_allclose(ours * scale[:, None], ROWS, atol=1e-12)  # rows up to scale
    g = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], dtype=float)
    f = ROWS @ g.reshape(-1)
    np.testing.assert_allclose(f, [-94, -58, 18, 134])
    for straggler, (row1, row2) in DECODE.items():
        survivors = tuple(w for w in range(4) if w != straggler)
        weights = code.weights(survivors) / scale[list(survivors)]  # weights for ROWS
        np.testing.assert_allclose(weights, np.array([row1, row2], dtype=float), atol=1e-12)
        np.testing.assert_allclose(weights @ f[list(survivors)], [16, 20], atol=1e-12)


def test_vector_5_top_coefficients_are_unit_vectors() -> None:
    """p_j^(u) has degree n-d+u-1 and its coefficients at n-d..K-1 form e_u (via interpolation)."""
    code = EvaluationCode(np.arange(4.0), 1, 2)
    raw = code.encoding * (code.row_scale * np.array([-6.0, 2, -2, 6]))[:, None, None]
    for j in range(4):
        holders = [(j - i) % 4 for i in range(3)]
        for u in range(2):
            coefficients = np.polyfit(np.arange(4.0)[holders], raw[holders, j, u], 2)[::-1]
            np.testing.assert_allclose(coefficients[1:], np.eye(2)[u], atol=1e-12)


def test_vector_6_cce_fr_groups() -> None:
    scheme = CCEFR(6, 1, 2)
    np.testing.assert_allclose(scheme.generator, [[1, 0], [0, 1], [1, 1]])
    grads = partials(scheme, 8)
    sent = packets(scheme, grads)
    for straggler in range(6):
        got = decode(scheme, sent, [w for w in range(6) if w != straggler], 8)
        assert relative_error(got, grads.sum(axis=0)) < 1e-12
    used, weights = scheme.checked_weights((1, 2, 3, 4, 5))
    stream1 = dict(zip(used, weights[0]))
    assert stream1[1] == -1 and stream1[2] == 1  # W0 out: h¹ = f2 - f1


def test_packet_is_a_fraction_and_load() -> None:
    scheme = CCECR(12, 2, 3)
    assert scheme.packet_fraction == pytest.approx(1 / 3)
    assert scheme.load == pytest.approx(5 / 12)
    grads = partials(scheme, 10)  # not a multiple of m: padded streams
    sent = packets(scheme, grads)
    assert sent[0].size == 4
    got = decode(scheme, sent, list(range(2, 12)), 10)
    assert relative_error(got, grads.sum(axis=0)) < 1e-12


@pytest.mark.parametrize("family", ["rotation", "real"])
def test_searched_nodes_are_distinct_and_deterministic(family: str) -> None:
    nodes = search_nodes(family, 64, 7, 2)
    assert len(set(nodes)) == 64 and max(map(abs, nodes)) <= 1.0 + 1e-12
    if family == "rotation":
        np.testing.assert_allclose(np.abs(nodes), 1.0)  # roots of unity
    search_nodes.cache_clear()
    assert search_nodes(family, 64, 7, 2) == nodes


@pytest.mark.parametrize(
    ("n", "s", "construction", "bound"),
    [(64, 7, "rotation", 1e-5), (256, 15, "rotation", 1e-5), (64, 7, "real", 1e-4)],
)
def test_float32_payload_accuracy(n: int, s: int, construction: str, bound: float) -> None:
    """Stability regression (docs/design.md, test vector 11): float32 packets decode
    accurately, at any n and s."""
    scheme = CCECR(n, s, 1, construction)
    grads = partials(scheme, 64).astype(np.float32)
    sent = packets(scheme, grads)
    rng = np.random.default_rng(5)
    for start in (0, n // 3):
        survivors = [w for w in range(n) if (w - start) % n >= s]
        got = decode(scheme, sent, rng.permutation(survivors).tolist(), 64)
        assert relative_error(got, grads.astype(np.float64).sum(axis=0)) < bound


@pytest.mark.parametrize(
    ("make", "fragments"),
    [
        (lambda: CCECR(8, 3, 6), ["s=3, m=6", "s + m <= n", "n=8", "1, 2, 3, 4, 5"]),
        (lambda: CCECR(8, 1, 0), ["m=0", "m >= 1"]),
        (lambda: CCECR(8, -2, 1), ["s=-2", "s >= 0"]),
        (lambda: CCEFR(8, 1, 2), ["s=1, m=2", "(s+m) | n", "n=8", "1, 3, 7"]),
        (lambda: CCEFR(8, 1, 2.0), ["m=2.0", "integer"]),
    ],
)
def test_bad_parameters_explain_themselves(make, fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        make()
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("length", [11, 12, 64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rotation_packets_are_real_and_as_short_as_real_ones(m: int, length: int, dtype) -> None:
    """Pairs of floats carry the complex code: same packet size as the real code."""
    rotation, real = CCECR(9, 2, m), CCECR(9, 2, m, "real")
    assert rotation.pairs and not real.pairs
    grads = partials(rotation, length).astype(dtype)
    sent = packets(rotation, grads)
    assert all(p.dtype == dtype and p.ndim == 1 for p in sent)
    assert sent[0].size == -(-length // (2 * m)) * 2  # ⌈l/m⌉ rounded up to even
    assert sent[0].size - packets(real, grads)[0].size <= 1
    got = decode(rotation, sent, [0, 2, 3, 5, 6, 7, 8], length)
    assert got.dtype == dtype and got.shape == (length,)  # the packets' precision
    tol = 1e-6 if dtype == np.float32 else 1e-12
    assert relative_error(got, grads.astype(np.float64).sum(axis=0)) < tol


def test_simulation_never_builds_the_code() -> None:
    """The exact predicate decides symbolic rounds: no node search at n = 256."""
    scheme = CCECR(256, 40, 2)
    decoder = scheme.decoder()
    for w in range(216):
        decoder.receive(0, w, None)
    assert decoder.decodable() == [0] and decoder.decode(0) is None
    assert "code" not in vars(scheme) and "encoding" not in vars(scheme)
