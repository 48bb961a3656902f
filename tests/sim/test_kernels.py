"""The fast search's helpers outside its round loop: bitsets, the compile settings, and the
tiers (interpreted until compiling pays, machine code once numba has it)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import njit
from numba.core import config

from gclab.sim.fast import bitsets
from gclab.sim.kernels import Tiered, forced, lean_compile


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


def _doubler() -> Tiered:
    @njit  # a fresh function: no machine code in this process or on disk
    def double(a):
        for i in range(a.size):
            a[i] *= 2

    return Tiered(double, budget=10)


def test_tiered_interprets_until_the_work_would_reach_the_budget_then_compiles() -> None:
    tiered, a = _doubler(), np.ones(3)
    assert [tiered(4, a), tiered(5, a)] == ["interpreted", "interpreted"]
    assert tiered.kernel.signatures == [] and tiered.interpreted == 9
    assert tiered(1, a) == "compiled"  # 9 + 1 reaches 10
    assert len(tiered.kernel.signatures) == 1
    assert tiered(0, a) == "compiled"  # machine code in this process: no more interpreting
    np.testing.assert_array_equal(a, [16, 16, 16])


def test_tiered_runs_the_forced_tier() -> None:
    tiered, a = _doubler(), np.ones(2)
    with forced("compiled"):
        assert tiered(0, a) == "compiled"
    with forced("interpreted"):
        assert tiered(100, a) == "interpreted"  # even past the budget, even compiled
    assert tiered(0, a) == "compiled"
    np.testing.assert_array_equal(a, [8, 8])


_CACHED = """
    import sys
    import numpy as np
    from numba import njit
    from gclab.sim.kernels import Tiered, forced

    @njit(cache=True)
    def triple(a):
        a *= 3

    tiered, a = Tiered(triple, budget=10), np.ones(2)
    cached = tiered.may_be_cached()
    with forced(sys.argv[1]):
        tiers = [tiered(1, a), tiered(1, a)]
    print(cached, *tiers, len(triple.signatures), triple.stats.cache_hits.total(), a.sum())
"""


@pytest.mark.slow  # three processes
def test_tiered_finds_machine_code_on_disk_and_never_compiles_to_look(tmp_path) -> None:
    """A process with numba's disk cache empty interprets a small call (numba compiles
    nothing); after a process that compiled, a small call runs the cached machine code."""
    script = tmp_path / "cached.py"
    script.write_text(textwrap.dedent(_CACHED))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}

    def run(tier: str) -> str:
        command = [sys.executable, str(script), tier]
        return subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout

    assert run("auto").split() == ["False", "interpreted", "interpreted", "0", "0", "18.0"]
    assert run("compiled").split() == ["False", "compiled", "compiled", "1", "0", "18.0"]
    assert run("auto").split() == ["True", "compiled", "compiled", "1", "1", "18.0"]
