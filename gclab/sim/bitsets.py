"""The bitset format of the fast search's kernels (:mod:`gclab.sim.kernels`,
:mod:`gclab.sim.sgc_kernels`).

A set of workers is ``words = ⌈n/64⌉`` ``uint64`` words, worker ``w`` bit ``w % 64`` of
word ``w // 64``. numpy only, so the search (:mod:`gclab.sim.fast`) builds its late sets
without importing numba.
"""

from __future__ import annotations

import numpy as np


def bitsets(flags: np.ndarray) -> np.ndarray:
    """Each row of ``flags`` (booleans along the last axis) as a bitset:
    ``⌈n/64⌉`` ``uint64`` words, flag ``w`` bit ``w % 64`` of word ``w // 64``."""
    n = flags.shape[-1]
    padded = np.zeros((*flags.shape[:-1], 64 * ((n + 63) // 64)), dtype=bool)
    padded[..., :n] = flags
    packed = np.packbits(padded, axis=-1, bitorder="little")  # flag w: bit w % 8 of byte w // 8
    return packed.view("<u8").astype(np.uint64)  # little-endian words, in native order
