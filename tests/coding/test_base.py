"""The shared linear-scheme machinery: combine, residual guard, weight cache, symbolic mode."""

from __future__ import annotations

import numpy as np
import pytest

from gclab.coding import linear, sums
from gclab.coding.cce import CCECR
from gclab.coding.classic import ClassicCR, ClassicFR
from gclab.coding.numerics import Outputs
from gclab.coding.sr_sgc import SRSGC
from gclab.coding.sums import combine
from gclab.errors import DecodeError
from helpers.coding import decode, packets, partials


def naive(vectors: list[np.ndarray], weights: np.ndarray) -> np.ndarray:
    """Σ_i C[u,i]·vector_i in float64 (complex: on float pairs), streams interleaved."""
    if np.iscomplexobj(weights):
        wide = [
            np.append(v, np.zeros(v.size % 2)).astype(np.float64).view(complex) for v in vectors
        ]
    else:
        wide = [v.astype(np.float64) for v in vectors]
    return (weights @ np.stack(wide)).T.reshape(-1).view(np.float64)


@pytest.mark.parametrize(
    ("m", "count", "pairs"),
    [
        (1, 1, False), (1, 2, False), (1, 3, False), (1, 5, False), (1, 7, False),
        (1, 16, False), (3, 3, False), (3, 5, False), (3, 12, False), (1, 1, True),
        (1, 3, True), (2, 3, True), (2, 5, True), (2, 7, True), (1, 16, True), (3, 6, True),
    ],
    ids=lambda v: str(v),
)  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_combine_is_the_float64_sum_rounded_once(m, count, pairs, dtype) -> None:
    """Both loop orders (up to four vectors; more: buffer rows four, two and one at a
    time, four vectors a pass padded with zeros, or four, two and one for a row alone),
    real and complex weights, several blocks and a ragged last one, read-only packets (as
    from Ray's object store): the result has the packets' dtype and equals the float64
    sum rounded once."""
    rng = np.random.default_rng(m * count)
    size = 2 * (3 * sums.BLOCK + 333) if pairs else 3 * sums.BLOCK + 333
    sent = [rng.standard_normal(size).astype(dtype) for _ in range(count)]
    for packet in sent:
        packet.flags.writeable = False
    weights = rng.standard_normal((m, count))
    if pairs:
        weights = weights + 1j * rng.standard_normal((m, count))
    grad_size = size * m - 1
    got = combine(sent, weights, grad_size)
    assert got.dtype == dtype and got.shape == (grad_size,)
    want = naive(sent, weights)[:grad_size]
    if dtype == np.float32:
        np.testing.assert_array_equal(got, want.astype(np.float32))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("count", [3, 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_combine_of_streams_fed_by_their_own_vectors_is_the_sum_rounded_once(count, dtype) -> None:
    """CCE FR's weights (each vector in one stream, shuffled, streams of 1 to 3 vectors)
    take the one-stream-per-row kernel: the same float64 sum rounded once."""
    rng = np.random.default_rng(count)
    size = 3 * sums.BLOCK + 333
    sent = [rng.standard_normal(size).astype(dtype) for _ in range(count)]
    stream = rng.permutation(np.arange(count) % 3)
    weights = np.zeros((3, count))
    weights[stream, np.arange(count)] = rng.standard_normal(count)
    assert sums._one_per_vector(weights)
    got = combine(sent, weights, 3 * size - 2)
    want = naive(sent, weights)[: 3 * size - 2]
    if dtype == np.float32:
        np.testing.assert_array_equal(got, want.astype(np.float32))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("pairs", [False, True])
def test_a_prepared_weighted_sum_serves_every_call(pairs: bool) -> None:
    """A :class:`~gclab.coding.sums.WeightedSum` (what a decoder caches per erasure
    pattern) gives the float64 sum rounded once on each new set of packets, of either
    dtype, into the decoder's reused result arrays; a wrong packet count is refused."""
    rng = np.random.default_rng(5)
    weights = rng.standard_normal((3, 7)) + (1j * rng.standard_normal((3, 7)) if pairs else 0)
    prepared = sums.WeightedSum(weights)
    outputs = Outputs(limit=3)
    size = 2 * sums.BLOCK + 77 + pairs  # float pairs: an even length
    for dtype in (np.float32, np.float64, np.float32):
        sent = [rng.standard_normal(size).astype(dtype) for _ in range(7)]
        got = prepared(sent, 3 * size - 1, outputs)
        want = naive(sent, weights)[: 3 * size - 1]
        if dtype == np.float32:
            np.testing.assert_array_equal(got, want.astype(np.float32))
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    with pytest.raises(ValueError, match="for 6 vectors: need \\[m, vectors\\]"):
        prepared(sent[:6], 3 * size)


def test_combine_pads_odd_float_pairs_and_widens_other_dtypes() -> None:
    rng = np.random.default_rng(2)
    sent = [rng.standard_normal(1001).astype(np.float32) for _ in range(6)]
    weights = rng.standard_normal((1, 6)) + 1j * rng.standard_normal((1, 6))
    got = combine(sent, weights, 1001)
    np.testing.assert_array_equal(got, naive(sent, weights)[:1001].astype(np.float32))
    halves = [v.astype(np.float16) for v in sent[:2]]
    assert combine(halves, np.ones((1, 2)), 1001).dtype == np.float64


def test_combine_refuses_mismatched_inputs() -> None:
    vectors = [np.zeros(4, np.float32), np.zeros(5, np.float32)]
    with pytest.raises(ValueError, match="lengths"):
        combine(vectors, np.ones((1, 2)), 4)
    with pytest.raises(ValueError, match="need \\[m, vectors\\]"):
        combine(vectors[:1], np.ones((1, 2)), 4)
    with pytest.raises(ValueError, match="need \\[m, vectors\\]"):
        combine([], np.ones((1, 0)), 4)


def test_outputs_never_hand_out_an_array_someone_holds() -> None:
    rng = np.random.default_rng(1)
    sent = [rng.standard_normal(3000) for _ in range(3)]
    weights = rng.standard_normal((1, 3))
    outputs = Outputs(limit=3)
    first = combine(sent, weights, 3000, outputs)
    kept = first.copy()
    view = combine(sent, 2 * weights, 3000, outputs)[10:]  # a view keeps its array alive
    third = combine(sent, 3 * weights, 3000, outputs)
    # float64 sums of scaled weights: equal to rounding of the largest term (cancellation
    # makes small entries' relative error large); an overwritten array is off by a multiple
    atol = 1e-13 * float(np.abs(kept).max())
    np.testing.assert_array_equal(first, kept)
    assert len({id(a.base) for a in (first, view, third)}) == 3
    np.testing.assert_allclose(view, 2 * kept[10:], rtol=1e-13, atol=2 * atol)
    held = id(first.base)  # the pool keeps the array: its id stays its own
    del first, view
    fourth = combine(sent, 4 * weights, 3000, outputs)
    assert id(fourth.base) == held  # dropped by the caller: reused
    np.testing.assert_allclose(fourth, 4 * kept, rtol=1e-13, atol=4 * atol)
    np.testing.assert_allclose(third, 3 * kept, rtol=1e-13, atol=3 * atol)


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
    # once for the pattern (each decoder solves the no-loss set ahead, when it is built)
    assert [c for c in calls if c != tuple(range(16))] == [calls[-1]]


def test_a_decoder_of_numbers_compiles_its_kernels_when_it_is_built(monkeypatch) -> None:
    """For the weights of the round without loss, before any clock starts; a symbolic
    decoder decodes nothing and compiles nothing."""
    compiled = []
    monkeypatch.setattr(linear, "compile_sums", compiled.append)
    scheme = ClassicCR(6, 2)
    scheme.decoder()
    assert compiled == []
    scheme.decoder(5)
    assert len(compiled) == 1
    np.testing.assert_array_equal(compiled[0], scheme.checked_weights(tuple(range(6)))[1])


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
    decoder.begin_round(0)
    reference.begin_round(0)
    decoder.receive_many(0, [1, 1, 2, 3], [sent[1], other, sent[2], sent[3]])
    decoder.receive(0, 1, other)
    for w in (1, 2, 3):
        reference.receive(0, w, sent[w])
    assert decoder.decodable() == reference.decodable() == [0]
    np.testing.assert_array_equal(decoder.decode(0), reference.decode(0))
