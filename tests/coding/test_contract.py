"""The contract's own minimal example (gclab/coding/contract.py) is a complete scheme."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import numpy as np
import pytest

from gclab.coding import contract
from gclab.coding.contract import SCHEMES, Task
from gclab.coding.uncoded import Uncoded
from gclab.network import NetworkConfig
from gclab.network.straggler import Straggler
from gclab.sim.engine import simulate


@pytest.fixture(scope="module")
def plain() -> Iterator[type]:
    """``Plain``, executed once from the module docstring's example (its class registers a
    config schema, which Hydra's store takes once per name)."""
    doc = contract.__doc__
    start = doc.index("::\n", doc.index("A minimal scheme")) + 3
    example = textwrap.dedent(doc[start : doc.index("\nIt is a complete scheme")])
    namespace: dict = {"__name__": "contract_example"}
    exec(compile(example, "contract_example", "exec"), namespace)
    yield namespace["Plain"]
    SCHEMES.pop("plain", None)


def test_the_example_simulates_like_uncoded(plain) -> None:
    network = NetworkConfig(policy="deadline", mu=0.5)
    delay = Straggler(0.5, 1.0)
    got = simulate(plain(4), delay, network, jobs=40, seed=3)
    want = simulate(Uncoded(4), delay, network, jobs=40, seed=3)
    assert got.waited.any()  # stragglers were waited for ...
    np.testing.assert_array_equal(got.durations, want.durations)  # ... as uncoded waits


def test_the_example_decodes_the_sum_of_its_parts(plain) -> None:
    scheme = plain(3)
    rng = np.random.default_rng(0)
    grads = rng.standard_normal((3, 5)).astype(np.float32)
    decoder = scheme.decoder(5)
    decoder.begin_round(0)
    tasks = decoder.plan(0)
    assert tasks == tuple((Task(0, w),) for w in range(3))
    for w in (2, 0, 1):
        decoder.receive(0, w, scheme.encoder(w).encode(0, {tasks[w][0]: grads[w]}))
    assert decoder.decodable() == [0] and decoder.wanted(0) == []
    np.testing.assert_allclose(decoder.decode(0), grads.astype(np.float64).sum(axis=0))
    assert not decoder.serves(0, 1) and decoder.wanted(0) == []
