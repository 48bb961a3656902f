"""The fast search's helpers outside its round loop: bitsets and the compile settings."""

import numpy as np
import pytest
from numba import njit
from numba.core import config

from gclab.sim.fast import bitsets
from gclab.sim.kernels import lean_compile


@pytest.mark.parametrize("n", [1, 63, 64, 65, 200, 256])
def test_bitsets_put_flag_w_at_bit_w_mod_64_of_word_w_div_64(n):
    flags = np.random.default_rng(n).random((3, n)) < 0.3
    words = bitsets(flags)
    assert words.dtype == np.uint64 and words.shape == (3, (n + 63) // 64)
    for row, bits in zip(flags, words):
        on = [int(w) for w in np.flatnonzero(row)]  # Python ints: bit 63 must not overflow
        want = [sum(1 << (w % 64) for w in on if w // 64 == k) for k in range(bits.size)]
        assert [int(b) for b in bits] == want


def test_lean_compile_lowers_the_optimizer_while_it_lasts_and_restores_it():
    saved = config.OPT, config.LOOP_VECTORIZE
    seen = []

    @njit
    def add(a, b):
        return a + b

    with lean_compile():
        seen.append((int(config.OPT), config.LOOP_VECTORIZE))
        assert add(1, 2) == 3  # compiles under the lean settings
    assert seen == [(min(int(saved[0]), 1), False)]
    assert saved == (config.OPT, config.LOOP_VECTORIZE)
    with pytest.raises(ZeroDivisionError), lean_compile():
        1 / 0  # noqa: B018
    assert saved == (config.OPT, config.LOOP_VECTORIZE)
