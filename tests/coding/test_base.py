"""The shared linear-scheme machinery: combine, residual guard, weight cache, symbolic mode."""

from __future__ import annotations

import numpy as np
import pytest

from gclab.coding import base
from gclab.coding.base import combine
from gclab.coding.cce import CCECR
from gclab.coding.classic import ClassicCR, ClassicFR
from gclab.coding.sgc import SRSGC
from gclab.errors import DecodeError
from helpers.coding import decode, packets, partials


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_combine_matches_naive_sum_across_chunks(m: int, dtype, monkeypatch) -> None:
    monkeypatch.setattr(base, "COMBINE_CHUNK", 7)  # many chunks and a ragged last one
    rng = np.random.default_rng(m)
    sent = [rng.standard_normal(30).astype(dtype) for _ in range(5)]
    weights = rng.standard_normal((m, 5))
    got = combine(sent, weights, 30 * m - 1)
    want = np.stack([weights[u] @ np.stack(sent).astype(np.float64) for u in range(m)], axis=1)
    assert got.dtype == np.float64 and got.shape == (30 * m - 1,)
    np.testing.assert_allclose(got, want.reshape(-1)[: 30 * m - 1], rtol=1e-13, atol=1e-13)


def test_failed_residual_check_raises_instead_of_decoding() -> None:
    scheme = ClassicCR(8, 2)
    grads = partials(scheme, 4)
    sent = packets(scheme, grads)
    scheme.encoding = scheme.encoding.copy()
    scheme.encoding[3, 3, 0] *= 1.001  # the closed-form weights no longer match the code
    decoder = scheme.decoder(4)
    for w in (0, 1, 2, 3, 4, 5):
        decoder.receive(0, w, sent[w])
    with pytest.raises(DecodeError, match="residual check"):
        decoder.decode(0)


def test_not_decodable_raises() -> None:
    scheme = ClassicFR(4, 1)
    decoder = scheme.decoder(3)
    decoder.receive(0, 0, np.zeros(3))
    assert decoder.decodable() == []
    with pytest.raises(DecodeError, match="not decodable"):
        decoder.decode(0)


def test_weights_computed_once_per_pattern(monkeypatch) -> None:
    scheme = CCECR(16, 3, 2)
    calls = []
    original = scheme.decoding_weights
    monkeypatch.setattr(scheme, "decoding_weights", lambda f: calls.append(f) or original(f))
    grads = partials(scheme, 6)
    sent = packets(scheme, grads)
    decoder = scheme.decoder(6)
    for round in range(5):
        order = [w for w in range(16) if w not in (2, 9, 10)][:: (-1) ** round]
        for w in order:
            decoder.receive(round, w, sent[w])
        assert decoder.decodable() == [round]
        np.testing.assert_allclose(decoder.decode(round), grads.sum(axis=0), rtol=1e-10)
    assert len(calls) == 1


def test_symbolic_mode_tracks_decodability_only() -> None:
    scheme = ClassicCR(6, 2)
    decoder = scheme.decoder()
    for w in (5, 0, 3):
        decoder.receive(7, w, None)
    assert decoder.decodable() == []
    assert decoder.wanted(7) == [(7, 1), (7, 2), (7, 4)]
    decoder.receive(7, 1, None)
    assert decoder.decodable() == [7]
    assert decoder.decode(7) is None
    assert decoder.wanted(7) == []


def test_late_packets_of_decoded_rounds_are_ignored() -> None:
    scheme = ClassicFR(4, 1)
    grads = partials(scheme, 3)
    sent = packets(scheme, grads)
    decoder = scheme.decoder(3)
    decoder.receive(0, 0, sent[0])
    decoder.receive(0, 2, sent[2])
    np.testing.assert_allclose(decoder.decode(0), grads.sum(axis=0))
    decoder.receive(0, 1, sent[1])
    assert decoder.decodable() == []
    assert decode(scheme, sent, [1, 3], 3) is not None


@pytest.mark.parametrize("make", [lambda: ClassicCR(4, 1), lambda: SRSGC(4, 1, 2, 2)])
def test_receive_many_keeps_the_first_copy_like_receive(make) -> None:
    """One call with a duplicate, and a later re-delivery: the first packet counts."""
    scheme = make()
    sent = [np.random.default_rng(w).standard_normal(6) for w in range(4)]
    other = np.full(6, 7.0)
    decoder, reference = scheme.decoder(6), scheme.decoder(6)
    decoder.receive_many(0, [1, 1, 2, 3], [sent[1], other, sent[2], sent[3]])
    decoder.receive(0, 1, other)
    for w in (1, 2, 3):
        reference.receive(0, w, sent[w])
    assert decoder.decodable() == reference.decodable() == [0]
    np.testing.assert_array_equal(decoder.decode(0), reference.decode(0))
