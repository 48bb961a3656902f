"""The fast search's helpers outside its round loop: bitsets, the compile settings, and the
tiers (interpreted until compiling pays, machine code once numba has it)."""

import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest
from numba import njit
from numba.core import config
from numba.core.dispatcher import Dispatcher

from gclab.sim import kernels, sgc_kernels
from gclab.sim.bitsets import bitsets
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
@pytest.mark.no_ray
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


_RENTED = """
    import os
    import numpy as np
    from numba import njit
    from gclab.sim.kernels import Tiered

    @njit(cache=True)
    def halve(a):
        a /= 2

    tiered, a = Tiered(halve, budget=10), np.ones(2)
    tier = tiered(4, a)
    kept = os.path.exists(tiered.kernel._cache._cache_file._index_path + ".interpreted")
    print(tier, tiered.interpreted, halve.stats.cache_hits.total(), kept)
"""


@pytest.mark.slow  # four processes
@pytest.mark.no_ray
def test_runs_too_small_to_compile_alone_compile_once_together_they_reach_the_budget(
    tmp_path,
) -> None:
    """The work interpreted is counted across processes: runs of 4 units against a
    budget of 10 interpret twice, then the third compiles and the fourth loads it."""
    script = tmp_path / "rented.py"
    script.write_text(textwrap.dedent(_RENTED))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}

    def run() -> list[str]:
        command = [sys.executable, str(script)]
        return subprocess.run(
            command, env=env, capture_output=True, text=True, check=True
        ).stdout.split()

    assert run() == ["interpreted", "4.0", "0", "True"]
    assert run() == ["interpreted", "8.0", "0", "True"]
    assert run() == ["compiled", "8.0", "0", "False"]  # 8 + 4 reaches 10; paid off
    assert run() == ["compiled", "0.0", "1", "False"]  # the machine code on disk


_CONCURRENT = """
    import numpy as np
    from numba import njit
    from gclab.sim.kernels import Tiered

    @njit(cache=True)
    def negate(a):
        a *= -1

    first, second, a = Tiered(negate, budget=100), Tiered(negate, budget=100), np.ones(2)
    tiers = [first(1, a), second(2, a), first(4, a)]  # the first's count misses the second's 2
    print(*tiers, first.interpreted, second.interpreted, Tiered(negate, 100)._interpreted_before())
"""


@pytest.mark.slow  # a process with numba's cache of its own
@pytest.mark.no_ray
def test_processes_interpreting_at_once_each_add_their_work_to_the_count(tmp_path) -> None:
    """Two counters of one kernel stand for two processes of a parallel sweep,
    interleaved: the first read the count before the second added its 2, and the next
    run still sees all 7 units (writing each process's total kept the last writer's 5)."""
    script = tmp_path / "concurrent.py"
    script.write_text(textwrap.dedent(_CONCURRENT))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    command = [sys.executable, str(script)]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["interpreted"] * 3 + ["5.0", "3.0", "7.0"]


_SOURCES = """
    import sys
    import numpy as np
    from numba import njit
    import factor
    from gclab.sim.kernels import Tiered, forced

    @njit(cache=True)
    def scale(a):
        a *= factor.factor()

    tiered, a = Tiered(scale, budget=10, sources=[factor]), np.ones(2)
    with forced(sys.argv[1]):
        tier = tiered(1, a)
    print(tier, scale.stats.cache_hits.total(), a.sum())
"""


@pytest.mark.slow  # four processes
@pytest.mark.no_ray
def test_a_kernel_cached_before_its_sources_changed_compiles_anew(tmp_path) -> None:
    """numba keys its cache on the kernel's own file: a helper module that changed (here
    the factor 3 -> 5.5) must not leave the old machine code running."""
    (tmp_path / "scale.py").write_text(textwrap.dedent(_SOURCES))
    helper = tmp_path / "factor.py"
    path = os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "PYTHONPATH": path}
    env["PYTHONDONTWRITEBYTECODE"] = "1"

    def run(tier: str) -> list[str]:
        command = [sys.executable, str(tmp_path / "scale.py"), tier]
        out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        return out.stdout.split()

    def factor(value: float) -> None:
        source = "from gclab.sim.kernels import _helper\n\n@_helper\ndef factor():\n"
        helper.write_text(f"{source}    return {value}\n")

    factor(3)
    assert run("compiled") == ["compiled", "0", "6.0"]
    assert run("auto") == ["compiled", "1", "6.0"]  # the cache, still valid
    factor(5.5)
    assert run("auto") == ["interpreted", "0", "11.0"]  # the stale cache is dropped
    assert run("compiled") == ["compiled", "0", "11.0"]  # compiled anew, not loaded
    assert run("auto") == ["compiled", "1", "11.0"]  # and cached for the new source


def _callees(function: types.FunctionType) -> set[types.FunctionType]:
    """The functions ``function`` calls by name from its module, and theirs, recursively."""
    seen, todo = set(), [function]
    while todo:
        code = todo.pop()
        for name in code.__code__.co_names:
            callee = code.__globals__.get(name)
            assert not isinstance(callee, Dispatcher), f"{code.__name__} calls {name}, jitted"
            if isinstance(callee, types.FunctionType) and callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return seen


@pytest.mark.parametrize("tiered", [sgc_kernels.sgc_rounds, kernels.fair_share_rounds])
def test_interpreted_kernels_call_only_plain_python(tiered) -> None:
    """Interpreted, a kernel must not call a numba dispatcher (which would compile it):
    every helper is plain Python to the interpreter."""
    helpers = {f.__name__ for f in _callees(tiered.kernel.py_func)}
    assert {"_sorts", "fair_share"} <= helpers or {"_receive", "_popcount"} <= helpers


def test_sgc_work_counts_a_unit_per_round_and_bitset_word_per_slot() -> None:
    B, W = np.array([1, 2]), np.array([2, 3])
    # SR-SGC: one slot; n = 65 is two words: (1 + 2) per setting and round
    assert sgc_kernels.sgc_work(False, 10, 65, B, W) == 10 * (3 + 3)
    # M-SGC: T + 1 = W - 1 + B slots (2 and 4)
    assert sgc_kernels.sgc_work(True, 10, 64, B, W) == 10 * ((1 + 2) + (1 + 4))


_FRESH = """
    import sys
    from gclab.network import NetworkConfig
    from gclab.network.straggler import Straggler
    from gclab.sim import kernels, sgc_kernels
    from gclab.sim.search import scheme_option, search

    tiers, run = [], kernels.Tiered.__call__
    kernels.Tiered.__call__ = lambda self, *a: tiers.append(run(self, *a)) or tiers[-1]
    kernel = sgc_kernels.sgc_rounds
    delay, network = Straggler(mean=1.0, slow_workers=2), NetworkConfig(recovery="wait_all")
    for name in ("sr_sgc", "m_sgc"):
        search(scheme_option(name), 8, delay, network, 12, 0, 0.0, 0.0, None)
        print(name, *sorted(set(tiers)), len(kernel.kernel.signatures), kernel.interpreted > 0)
        tiers.clear()
        if sys.argv[1] == "cross":  # the next search's first call crosses the budget
            kernel.budget = kernel.interpreted + 1
"""


@pytest.mark.slow  # compiles the SGC loop in fresh processes
@pytest.mark.no_ray
def test_a_fresh_install_interprets_the_sgc_loop_until_the_budget_then_loads_it(tmp_path):
    script = tmp_path / "fresh.py"
    script.write_text(textwrap.dedent(_FRESH))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}

    def run(budget: str) -> list[str]:
        command = [sys.executable, str(script), budget]
        out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        return out.stdout.splitlines()

    assert run("default") == ["sr_sgc interpreted 0 True", "m_sgc interpreted 0 True"]
    assert run("cross") == ["sr_sgc interpreted 0 True", "m_sgc compiled 1 True"]
    # the next process finds the machine code on disk: nothing interpreted
    assert run("default") == ["sr_sgc compiled 1 False", "m_sgc compiled 1 False"]
