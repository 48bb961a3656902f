"""The bitset format of the fast search's kernels (:mod:`gclab.sim.kernels`,
:mod:`gclab.sim.sgc_kernels`).

A set of workers is ``words = ⌈n/64⌉`` ``uint64`` words, worker ``w`` bit ``w % 64`` of
word ``w // 64``. numpy only, so the search (:mod:`gclab.sim.fast`) builds its late sets
without importing numba. The search counts a set's members from its bytes
(:data:`BYTE_BITS`) before turning them into words.
"""

from __future__ import annotations

import numpy as np

#: The set bits of each byte value.
BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1)


def bitsets(flags: np.ndarray) -> np.ndarray:
    """Each row of ``flags`` (booleans along the last axis) as a bitset:
    ``⌈n/64⌉`` ``uint64`` words, flag ``w`` bit ``w % 64`` of word ``w // 64``."""
    return words(packed(flags))


def packed(flags: np.ndarray) -> np.ndarray:
    """``flags`` padded to whole words, 8 to a byte: flag ``w`` is bit ``w % 8`` of byte
    ``w // 8``."""
    n = flags.shape[-1]
    if n % 64:
        padded = np.zeros((*flags.shape[:-1], 64 * ((n + 63) // 64)), dtype=bool)
        padded[..., :n] = flags
        flags = padded
    return np.packbits(flags, axis=-1, bitorder="little")


def words(packed: np.ndarray) -> np.ndarray:
    """Bytes from :func:`packed` as ``uint64`` words (little-endian: byte ``w // 8`` of a
    word holds its bits ``8·(w // 8) …``), in native order."""
    return packed.view("<u8").astype(np.uint64, copy=False)
