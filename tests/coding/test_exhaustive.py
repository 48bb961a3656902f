"""Every scheme, every (n, s[, m]) with n <= 8, every erasure pattern; random ones beyond."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gclab.coding import linear
from gclab.coding.cce import CCECR, CCEFR
from gclab.coding.classic import ClassicCR, ClassicFR
from gclab.coding.contract import SCHEMES
from gclab.coding.linear import LinearScheme
from helpers.coding import (
    builtin_schemes,
    decodable_in_principle,
    decode,
    packets,
    partials,
    relative_error,
)
from helpers.coding import schemes as all_schemes


@pytest.fixture(autouse=True)
def no_compiling_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """A decoder compiles its float32 kernels when it is built, so that no decode on a clock
    pays the compiler (tests/coding/test_base.py checks it does). These tests decode float64
    packets, which never run those kernels; compiling them ahead for each of their ~70 shapes
    took 35 of the file's 45 CPU seconds."""
    monkeypatch.setattr(linear, "compile_sums", lambda weights: None)


def test_every_built_in_static_scheme_is_enumerated() -> None:
    """``helpers.coding.schemes`` yields every built-in static code, so the tests below do."""
    static = {name for name in builtin_schemes() if issubclass(SCHEMES[name], LinearScheme)}
    assert {scheme.name for scheme in all_schemes(8)} == static


#: 2^7 and 2^8 patterns of every code take most of this file's time: the slow lane's
#: (beside the Ray tests, on the other core).
BRUTE = [pytest.mark.slow, pytest.mark.no_ray]


@pytest.mark.parametrize("n", [*range(1, 7), *(pytest.param(n, marks=BRUTE) for n in (7, 8))])
def test_predicate_equals_decodability_and_decodes_exactly(n: int) -> None:
    patterns = [np.array(bits, dtype=bool) for bits in itertools.product([False, True], repeat=n)]
    for scheme in all_schemes(n):
        grads = partials(scheme, 3 * scheme.m + 1)
        sent = packets(scheme, grads)
        truth = grads.sum(axis=0)
        for erased in patterns:
            survivors = [w for w in range(n) if not erased[w]]
            arrivals = survivors[::-1]  # a non-sorted arrival order
            got = decode(scheme, sent, arrivals, grads.shape[1])
            claimed = scheme.tolerates(erased)
            where = f"{scheme.describe()} erased={np.flatnonzero(erased).tolist()}"
            assert claimed == (got is not None), where
            assert scheme.tolerates(erased[None, :]) == claimed, where
            if scheme.exact:
                assert claimed == decodable_in_principle(scheme, survivors), where
                if got is not None:
                    assert relative_error(got, truth) <= 1e-9, where
            elif got is not None:  # ignore_stragglers: rescaled sum of the first n-s arrivals
                used = arrivals[: n - scheme.s]
                want = grads[used].sum(axis=0) * n / len(used)
                assert relative_error(got, want) <= 1e-12, where


RANDOM_CASES = [
    *[(ClassicCR, n, {"s": s}) for n, s in [(16, 3), (16, 4), (64, 7), (64, 16), (256, 15)]],
    *[(CCECR, n, {"s": s, "m": 2}) for n, s in [(16, 3), (64, 15), (256, 7)]],
    *[(ClassicFR, n, {"s": s}) for n, s in [(16, 3), (64, 7), (256, 15)]],
    *[(CCEFR, n, {"s": s, "m": m}) for n, s, m in [(16, 2, 2), (64, 6, 2), (256, 14, 2)]],
]


@pytest.mark.parametrize(("cls", "n", "kwargs"), RANDOM_CASES, ids=lambda v: str(v))
def test_random_patterns_large_n(cls, n: int, kwargs: dict) -> None:
    scheme = cls(n, **kwargs)
    rng = np.random.default_rng(n)
    grads = partials(scheme, 2 * scheme.m)
    sent = packets(scheme, grads)
    truth = grads.sum(axis=0)
    for count in [scheme.s] * 6 + [scheme.s + 1] * 3 + [n // 2] * 3:
        erased = np.zeros(n, dtype=bool)
        erased[rng.choice(n, count, replace=False)] = True
        survivors = np.flatnonzero(~erased).tolist()
        got = decode(scheme, sent, rng.permutation(survivors).tolist(), grads.shape[1])
        assert scheme.tolerates(erased) == (got is not None), (scheme.describe(), count)
        if count <= scheme.s:
            assert got is not None
        if got is not None:
            assert relative_error(got, truth) <= 1e-9, (scheme.describe(), count)
