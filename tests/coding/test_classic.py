"""Test vectors 1–4 of docs/design.md and the properties of classic GC and ignore_stragglers."""

from __future__ import annotations

import numpy as np
import pytest

from gclab.coding.classic import ClassicCR, ClassicFR, IgnoreStragglers, random_h, tandon_encoding
from gclab.coding.linear import LinearScheme
from gclab.errors import ConfigError
from helpers.coding import decode, packets, partials, relative_error


class Explicit(LinearScheme):
    """A code given by its matrix B, decoded by the base class's least squares."""

    name = "explicit"

    def __init__(self, b: np.ndarray, s: int) -> None:
        self._init_linear(b.shape[0], s, b)


def full_weights(scheme: LinearScheme, stragglers: set[int]) -> np.ndarray:
    """Length-n decoding vector for a straggler set (zeros for unused workers)."""
    survivors = tuple(w for w in range(scheme.n) if w not in stragglers)
    used, weights = scheme.checked_weights(survivors)
    full = np.zeros(scheme.n)
    full[list(used)] = weights[0]
    return full


def test_vector_1_fr_block_form() -> None:
    fr = ClassicFR(4, 1)
    want = [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]]
    np.testing.assert_array_equal(fr.encoding[:, :, 0], want)
    np.testing.assert_array_equal(full_weights(fr, {0}), [0, 1, 1, 0])
    np.testing.assert_array_equal(full_weights(fr, {2}), [1, 0, 0, 1])


def test_vector_2_tandon_paper_example() -> None:
    b = np.array([[0.5, 1, 0], [0, 1, -1], [0.5, 0, 1]])
    a = np.array([[0, 1, 2], [1, 0, 1], [2, -1, 0]])
    np.testing.assert_allclose(a @ b, np.ones((3, 3)))
    code = Explicit(b, 1)
    for straggler in range(3):
        np.testing.assert_allclose(full_weights(code, {straggler}), a[straggler], atol=1e-12)


def test_vector_3_deterministic_h() -> None:
    b = tandon_encoding(np.array([[1.0, -1, 1, -1]]))
    np.testing.assert_allclose(b, [[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1], [1, 0, 0, 1]])
    code = Explicit(b, 1)
    want = [(0, 1, 0, 1), (1, 0, 1, 0), (0, 1, 0, 1), (1, 0, 1, 0)]
    for straggler, row in enumerate(want):
        np.testing.assert_allclose(full_weights(code, {straggler}), row, atol=1e-12)


def test_vector_4_raviv_real_bch() -> None:
    phi = (1 + 5**0.5) / 2
    b = np.zeros((5, 5))
    for w in range(5):
        b[w, [w, (w + 1) % 5, (w + 2) % 5]] = (1, phi, 1)
    code = Explicit(b, 2)
    cases = {
        (3, 4): ((0, 1, 2), (1, -0.618034, 1)),
        (0, 2): ((1, 3, 4), (0.618034, 0.381966, 0.381966)),
        (1, 2): ((0, 3, 4), (1, 1, -0.618034)),
    }
    for stragglers, (survivors, values) in cases.items():
        got = full_weights(code, set(stragglers))[list(survivors)]
        np.testing.assert_allclose(got, values, atol=1e-6)
    np.testing.assert_allclose(tandon_encoding(np.array([[1.0, -1, 1, -1]]))[0, :2], (1, 1))


@pytest.mark.parametrize(("n", "s"), [(4, 1), (20, 5), (64, 7)])
def test_tandon_random_h_properties(n: int, s: int) -> None:
    h = random_h(n, s, seed=3)
    b = tandon_encoding(h)
    for w in range(n):
        assert set(np.flatnonzero(b[w])) == {(w + i) % n for i in range(s + 1)}
    np.testing.assert_allclose(h @ b.T, 0, atol=1e-9)
    assert np.linalg.matrix_rank(b) == n - s
    scheme = ClassicCR(n, s, construction="tandon", seed=3)
    rng = np.random.default_rng(0)
    for _ in range(10):
        stragglers = set(rng.choice(n, s, replace=False).tolist())
        survivors = tuple(w for w in range(n) if w not in stragglers)
        used, weights = scheme.checked_weights(survivors)
        assert scheme.residual(used, weights) <= 1e-10


def test_classic_cr_support_and_load() -> None:
    for construction in ("rotation", "real", "tandon"):
        cr = ClassicCR(10, 3, construction=construction)
        cyclic = tuple(tuple(sorted((w + i) % 10 for i in range(4))) for w in range(10))
        assert cr.placement == cyclic
        assert cr.load == pytest.approx(0.4)
    rows = np.abs(ClassicCR(10, 3).encoding).max(axis=(1, 2))
    np.testing.assert_allclose(rows, 1.0)  # per-row scaling: float32 packets use full mantissa


def test_fr_tolerates_more_than_s_spread_over_groups() -> None:
    fr = ClassicFR(8, 1)
    erased = np.array([1, 0, 0, 1, 1, 0, 0, 1], dtype=bool)  # 4 erasures, one per group
    assert fr.tolerates(erased)
    assert not fr.tolerates(np.array([1, 1, 0, 0, 0, 0, 0, 0], dtype=bool))


def test_ignore_stragglers_uses_first_arrivals() -> None:
    scheme = IgnoreStragglers(6, 2)
    assert not scheme.exact and scheme.order_matters
    grads = partials(scheme, 5)
    sent = packets(scheme, grads)
    arrivals = [5, 2, 0, 4, 1]
    got = decode(scheme, sent, arrivals, 5)
    want = grads[[5, 2, 0, 4]].sum(axis=0) * 6 / 4
    assert relative_error(got, want) < 1e-12
    assert decode(scheme, sent, [5, 2, 0], 5) is None


@pytest.mark.parametrize(
    ("make", "fragments"),
    [
        (lambda: ClassicFR(8, 2), ["s=2", "(s+1) | n", "n=8", "0, 1, 3, 7"]),
        (lambda: ClassicFR(6, 6), ["s=6", "0 <= s < n", "n=6", "0, 1, 2, 3, 4, 5"]),
        (lambda: ClassicCR(4, -1), ["s=-1", "0 <= s < n", "0, 1, 2, 3"]),
        (lambda: ClassicCR(100, 100), ["s=100", "n=100", "0..99"]),
        (
            lambda: ClassicCR(8, 1, construction="bch"),
            ["construction='bch'", "rotation, real, tandon"],
        ),
        (lambda: ClassicCR(8, "2"), ["s='2'", "integer"]),
        (lambda: IgnoreStragglers(3, 3), ["s=3", "0 <= s < n", "0, 1, 2"]),
        (lambda: ClassicCR(0, 0), ["n=0 is invalid"]),
    ],
)
def test_bad_parameters_explain_themselves(make, fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        make()
    message = str(info.value)
    assert message.count(". ") == 0 and message.endswith(".")  # one sentence
    for fragment in fragments:
        assert fragment in message
