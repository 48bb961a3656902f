"""Partial decoding (``network.recovery=partial``): the rescaled sum of the covered parts.

Real packets from the schemes' encoders, decoded in process: the applied gradient is
``k/|S| · Σ_{j∈S} g_j`` for the parts ``S`` the scheme's structure covers, computed here
independently of the decoder (docs/design.md, "Partial recovery").
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gclab.coding.cce import CCECR, CCEFR
from gclab.coding.classic import ClassicCR, ClassicFR, IgnoreStragglers
from gclab.coding.linear import LinearScheme
from gclab.coding.uncoded import Uncoded
from gclab.errors import ConfigError
from gclab.network import NetworkConfig
from gclab.network.protocol import check_recovery
from helpers.coding import packets, partials


def groups_covered(scheme: LinearScheme, survivors: tuple[int, ...], size: int, m: int) -> list:
    """Parts of the FR groups (``size`` consecutive workers) with at least ``m`` survivors."""
    alive = [sum(w // size == q for w in survivors) for q in range(scheme.n // size)]
    covered = [q for q, count in enumerate(alive) if count >= m]
    return [j for q in covered for j in range(q * size, (q + 1) * size)]


#: (scheme, the parts a survivor set covers, by the scheme's structure).
CASES = {
    "classic_fr": (ClassicFR(8, 1), lambda s, f: groups_covered(s, f, 2, 1)),
    "cce_fr": (CCEFR(12, 1, 3), lambda s, f: groups_covered(s, f, 4, 3)),
    "classic_cr": (ClassicCR(8, 2), lambda s, f: []),
    "cce_cr": (CCECR(8, 1, 2), lambda s, f: []),
    "uncoded": (Uncoded(8), lambda s, f: sorted(f)),
    "ignore_stragglers": (IgnoreStragglers(8, 2), lambda s, f: sorted(f)),
}


@pytest.mark.parametrize("name", CASES)
def test_applied_gradient_is_the_rescaled_sum_of_the_covered_parts(name: str) -> None:
    scheme, cover = CASES[name]
    grads = partials(scheme, 13, seed=1).astype(np.float32)
    sent = packets(scheme, grads)
    rng = np.random.default_rng(2)
    seen = 0
    for _ in range(40):
        survivors = tuple(rng.permutation(scheme.n)[: rng.integers(0, scheme.n)].tolist())
        decoder = scheme.decoder(grads.shape[1])
        for w in survivors:
            decoder.receive(0, w, sent[w])
        if decoder.decodable():
            continue
        seen += 1
        gradient, coverage = decoder.decode_partial(0)
        parts = cover(scheme, survivors)
        assert coverage == len(parts) / len(scheme.parts)
        if not parts:
            assert gradient is None
            continue
        want = grads[parts].astype(np.float64).sum(axis=0) * len(scheme.parts) / len(parts)
        np.testing.assert_allclose(gradient, want, rtol=1e-5, atol=1e-5)
        assert decoder.decodable() == [] and decoder.wanted(0) == []  # the job is done
    assert seen >= 10


def test_symbolic_partial_gives_coverage_only() -> None:
    decoder = ClassicFR(8, 1).decoder()
    decoder.receive_many(0, [0, 1, 4], [None] * 3)
    assert decoder.decode_partial(0) == (None, 0.5)


@pytest.mark.parametrize("construction", ["real", "tandon"])
def test_cyclic_packets_below_n_minus_s_determine_no_partition_sum(construction: str) -> None:
    """Why ``classic_cr`` covers nothing when it does not decode: no sum of parts is in the
    row space of fewer than ``n − s`` of its packets (every survivor set, every part set)."""
    scheme = ClassicCR(6, 2, construction=construction, seed=1)
    e = scheme.encoding[:, :, 0]
    sets = [np.array(s) for k in range(1, 7) for s in itertools.combinations(range(6), k)]
    for size in range(1, scheme.n - scheme.s):
        for survivors in itertools.combinations(range(6), size):
            rows = e[list(survivors)]
            for parts in sets:
                target = np.zeros(6)
                target[parts] = 1
                weights = np.linalg.lstsq(rows.T, target, rcond=None)[0]
                assert np.abs(rows.T @ weights - target).max() > 1e-6, (survivors, parts)


@pytest.mark.parametrize(
    "name, overrides",
    [("pipelined_cr", {"T": 1}), ("pipelined_fr", {"T": 1}), ("sr_sgc", {}), ("m_sgc", {})],
)
def test_schemes_across_rounds_refuse_partial_in_one_sentence(name: str, overrides: dict) -> None:
    from gclab.coding.contract import SCHEMES

    scheme = SCHEMES[name](4, **overrides)
    with pytest.raises(ConfigError) as error:
        check_recovery(scheme, NetworkConfig(recovery="partial"))
    message = str(error.value)
    assert "\n" not in message and message.endswith(".") and name in message
    check_recovery(scheme, NetworkConfig(recovery="decodable"))  # the others stay open


def test_every_scheme_implements_partial_decoding_exactly_when_it_declares_it() -> None:
    """``Scheme.partial`` gates ``network.recovery=partial``; it must match the decoder."""
    from gclab.coding.contract import SCHEMES, Decoder

    builtin = {name: cls for name, cls in SCHEMES.items() if cls.__module__.startswith("gclab.")}
    assert len(builtin) >= 10  # other tests register schemes whose constructors differ
    for name, cls in builtin.items():
        scheme = cls(8)
        decoder = scheme.decoder()
        implemented = type(decoder).decode_partial is not Decoder.decode_partial
        assert implemented == scheme.partial, name
        if not scheme.partial:  # reached only past check_recovery: a bug, named as such
            with pytest.raises(NotImplementedError, match="has no partial decoding"):
                decoder.decode_partial(0)
