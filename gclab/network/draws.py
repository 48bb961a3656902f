"""Seeded random draws addressed by (seed, stream, round), generated in blocks.

Every random number the network models use is a pure function of the run's seed, a
stream id (what the number is for) and the round it belongs to, so the runtime and the
simulator see the same pattern whatever order they ask in. Rows are generated
``BLOCK`` rounds at a time and cached, which keeps a 1000-round simulation at a few
dozen generator calls instead of thousands.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

#: Rounds generated per call of the bit generator.
BLOCK = 256

# Stream ids: one per purpose, so that no two draws share random numbers.
DELAY = 0
LOSS = 1
RETRANSMIT = 2
TRANSITION = 3
INITIAL = 4
SLOW = 5
SOJOURN = 6
TRANSFER = 7


def stream_seed(seed: int, stream: int) -> int:
    """The seed of a run's delay and loss draws: ``seed`` itself for stream 0, else a
    64-bit seed derived from ``(seed, stream)``. Runs that differ only in the stream
    (``network.stream``) share batches and initial weights but see other delays and
    losses: an A/A replicate of one arm."""
    if stream == 0:
        return int(seed)
    state = np.random.SeedSequence([int(seed), int(stream)]).generate_state(1, np.uint64)
    return int(state[0])


def generator(*key: int) -> np.random.Generator:
    """A generator seeded by a tuple of non-negative integers (seed first)."""
    return np.random.default_rng(np.random.SeedSequence([int(k) for k in key]))


@lru_cache(maxsize=64)
def _uniform_block(seed: int, stream: int, block: int, n: int) -> np.ndarray:
    rows = generator(seed, stream, block).random((BLOCK, n))
    rows.setflags(write=False)
    return rows


@lru_cache(maxsize=64)
def _exponential_block(seed: int, stream: int, block: int, n: int) -> np.ndarray:
    rows = generator(seed, stream, block).standard_exponential((BLOCK, n))
    rows.setflags(write=False)
    return rows


def uniform_block(seed: int, stream: int, block: int, n: int) -> np.ndarray:
    """Read-only U[0,1) draws ``[BLOCK, n]`` of rounds ``block*BLOCK ..``."""
    return _uniform_block(seed, stream, block, n)


def uniform(seed: int, stream: int, round: int, n: int) -> np.ndarray:
    """Read-only U[0,1) draws ``[n]`` of one round."""
    return _uniform_block(seed, stream, round // BLOCK, n)[round % BLOCK]


def exponential(seed: int, stream: int, round: int, n: int) -> np.ndarray:
    """Read-only Exp(1) draws ``[n]`` of one round."""
    return _exponential_block(seed, stream, round // BLOCK, n)[round % BLOCK]


def attempts(seed: int, round: int, packet_round: int, shape: tuple[int, ...]) -> np.ndarray:
    """U[0,1) draws for retransmission attempts in ``round`` of packets of ``packet_round``.

    ``shape`` starts with the number of attempts; the draws are prefix-stable in it
    (asking for more attempts later repeats the earlier ones), so the protocol can ask
    for a few attempts and extend only when a packet keeps getting lost.
    """
    return generator(seed, RETRANSMIT, round, packet_round).random(shape)


def exponential_run(seed: int, stream: int, key: int, block: int) -> np.ndarray:
    """Read-only Exp(1) draws ``[BLOCK]``: block ``block`` of a sequence keyed by ``key``
    (e.g. a worker), for models that draw one value after another rather than per round."""
    rows = generator(seed, stream, key, block).standard_exponential(BLOCK)
    rows.setflags(write=False)
    return rows
