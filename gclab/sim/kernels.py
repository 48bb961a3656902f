"""Compiled loops of the fast parameter search (:mod:`gclab.sim.fast`), and what the
SGC kernel (:mod:`gclab.sim.sgc_kernels`) shares.

The static codes' rounds are numpy (:func:`gclab.sim.fast.round_stats`); compiled here
is the shared server link's processor sharing of every profile and round
(:func:`fair_share_rounds`), and the SGC kernel's helpers build on :data:`_helper` and
the bitset words ``ONE``/``ZERO``. Arguments shared with the SGC kernel:

* ``arrivals[l, r, w]``: arrival of worker ``w``'s packet in round ``r`` at load ``l``;
  ``close``, ``top``, ``late_bits``, ``late_count``: :func:`gclab.sim.fast.round_stats`
  of them (a late set is a bitset, :mod:`gclab.sim.bitsets`); ``load_of[i]``: setting
  ``i``'s load;
* ``jobs``; ``rto_of[i]``, setting ``i``'s retransmission cycle (``network.rto`` plus
  its packet's time on the wire); ``wait_all`` (``network.recovery=wait_all``);
* outputs ``[settings, rounds]``: ``ran`` (the round ran), ``duration``, ``erased``,
  ``late``, ``sent`` (retransmission attempts), ``waited``; ``failed[i]`` is set when
  setting ``i`` needs a recovery that cannot succeed (the engine then reports it).

Compiled with numba and cached on disk (``cache=True``), and run through :class:`Tiered`:
machine code when numba has it (compiled in this process, or cached by an earlier one),
else the same Python function interpreted until interpreting (counted across runs) has
cost about what compiling would, then compiled. A fresh install's small search (the
README's) compiles nothing, and neither do the next few runs like it; the run that
brings their interpreted work to the budget, a large search, or an adaptive run's many
searches, compiles once, and later runs load the machine code. Compile time is kept
down by what the kernels avoid: numba's sorts and ``np.partition`` (numpy sorts outside,
or :func:`gclab.sim.sgc_kernels._stable_order`), and array-to-array slice assignments
(element loops).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from types import ModuleType
from typing import Any, Literal

import numpy as np
from numba import njit
from numba.core import config, event
from numba.core.dispatcher import Dispatcher
from numba.extending import register_jitable

from gclab.network import links

#: A function the kernels call: compiled into the kernel that calls it (a cached kernel
#: holds its helpers' machine code; no C wrapper of its own), and plain Python when the
#: kernel runs interpreted.
_helper = register_jitable(no_cfunc_wrapper=True)

_fair_share = _helper(links.fair_share)

ONE = np.uint64(1)
ZERO = np.uint64(0)


@contextmanager
def lean_compile() -> Iterator[None]:
    """numba's optimizer at ``-O1`` (at most) without loop vectorization while a search
    kernel compiles, the process's settings restored after. The kernels loop over a few
    bitset words per worker set; ``-O3`` and the vectorizer cost about 0.7 s of a fresh
    install's first search and make no search measurably faster (BENCHMARKS.md, "Fast
    first runs"). numba reads these settings when it optimizes a function, and a cached
    kernel keeps the code it was compiled to."""
    saved = config.OPT, config.LOOP_VECTORIZE
    config.OPT, config.LOOP_VECTORIZE = min(saved[0], 1), False
    try:
        yield
    finally:
        config.OPT, config.LOOP_VECTORIZE = saved


Tier = Literal["auto", "compiled", "interpreted"]
_tiers: list[Tier] = ["auto"]


@contextmanager
def forced(tier: Tier) -> Iterator[None]:
    """Every :class:`Tiered` kernel runs as ``tier`` while this lasts (``compiled``
    compiles when numba has no machine code): the tests check both tiers against the
    engine, and the benchmarks time the one they measure."""
    _tiers.append(tier)
    try:
        yield
    finally:
        _tiers.pop()


class _Refused(Exception):
    """A compile that :class:`Tiered` stopped before it started."""


class _NoCompiling(event.Listener):
    def on_start(self, event: event.Event) -> None:
        raise _Refused

    def on_end(self, event: event.Event) -> None:
        pass


class Tiered:
    """A numba kernel (``cache=True``) that compiles only when compiling pays: ski rental.

    A call runs the machine code when numba has it (compiled in this process, or cached on
    disk by an earlier one and found at the process's first call); otherwise the Python
    function, interpreted, while the work interpreted so far plus the call's stays below
    ``budget``; otherwise it compiles (at :func:`lean_compile`'s settings) and runs
    compiled. ``budget`` is the work, in the units the caller passes, that takes about as
    long to interpret as the kernel takes to compile (both measured by ``python
    bench/kernel_tiers.py``). The work interpreted is counted across processes, beside
    numba's cache (``<index>.interpreted``, a line appended per call, so that processes
    running at once each add theirs), so that a search too small to compile in one
    run compiles once its runs have interpreted the budget, and no sequence of runs
    spends more than about twice what the better choice would have cost.

    ``sources`` are the other modules whose functions the kernel compiles in. numba keys
    its disk cache on the kernel's own file only, so machine code cached before one of
    them changed would still run (and disagree with the interpreted tier); a digest of
    their files is kept beside numba's index (``<index>.sources``), and at the process's
    first call a cache whose digest differs is dropped (its index removed), so that the
    kernel compiles anew.
    """

    def __init__(
        self, kernel: Dispatcher, budget: float, sources: Sequence[ModuleType] = ()
    ) -> None:
        self.kernel = kernel
        self.budget = budget
        self.sources = tuple(sources)
        self.interpreted = 0.0  # work interpreted so far (read from disk at the first call)
        self.looked_up = False  # numba's disk cache, at the process's first call
        self.checked = False  # the cache's sources and interpreted work, at the first call
        self.stamped = False  # the cache's records updated once this process compiled

    def __call__(self, work: float, *args: Any) -> Tier:
        """Run the kernel on ``args`` (``work`` units); returns the tier that ran it."""
        if not self.checked:
            self.checked = True
            self._drop_if_stale()
            self.interpreted += self._interpreted_before()
        tier = _tiers[-1]
        if tier == "auto":
            if self.kernel.signatures or self.interpreted + work >= self.budget:
                tier = "compiled"
            elif not self.looked_up:
                self.looked_up = True
                if self.may_be_cached() and self._run_cached(args):
                    return "compiled"
        if tier == "compiled":
            with lean_compile():
                self.kernel(*args)
            if not self.stamped:
                self.stamped = True
                self._stamp()
            return tier
        self.kernel.py_func(*args)
        self.interpreted += work
        self._append("interpreted", f"{work!r}\n")
        return "interpreted"

    def may_be_cached(self) -> bool:
        """Whether numba's disk cache may hold the kernel's machine code: its index file
        exists. numba's own lookup first sets up its compiler target (about 0.4 s), which
        a process that only interprets never needs. The index's path is numba's private
        attribute; where numba has none, the lookup decides."""
        index = self._index_path()
        return index is None or os.path.exists(index)

    def _index_path(self) -> str | None:
        """numba's index of the kernel's disk cache (a private attribute; ``None`` where
        numba has none, or caches nothing: then nothing is kept beside it either)."""
        try:
            return self.kernel._cache._cache_file._index_path
        except AttributeError:
            return None

    def _read(self, record: str) -> str | None:
        """The ``record`` kept beside numba's index (``sources``, ``interpreted``), if any."""
        index = self._index_path()
        if index is None:
            return None
        try:
            with open(f"{index}.{record}") as file:
                return file.read()
        except OSError:
            return None

    def _write(self, record: str, text: str | None) -> None:
        """Keep ``text`` as ``record`` beside numba's index (``None``: remove it); a cache
        folder numba cannot write keeps nothing."""
        index = self._index_path()
        if index is None:
            return
        with suppress(OSError):
            if text is None:
                os.remove(f"{index}.{record}")
                return
            with open(f"{index}.{record}", "w") as file:
                file.write(text)

    def _append(self, record: str, line: str) -> None:
        """Append ``line`` to ``record`` beside numba's index. One short ``O_APPEND`` write
        per line, so processes interpreting at once (a parallel sweep's jobs) each add their
        own work and none overwrites another's."""
        index = self._index_path()
        if index is None:
            return
        with suppress(OSError), open(f"{index}.{record}", "a") as file:
            file.write(line)

    def _interpreted_before(self) -> float:
        """The work that other processes interpreted since the kernel was last compiled:
        the sum of the lines they appended (an unreadable line counts nothing)."""
        total = 0.0
        for line in (self._read("interpreted") or "").splitlines():
            with suppress(ValueError):
                total += float(line)
        return total

    def _digest(self) -> str:
        """The SHA-256 of the ``sources`` files."""
        digest = hashlib.sha256()
        for module in self.sources:
            with open(module.__file__, "rb") as source:
                digest.update(source.read())
        return digest.hexdigest()

    def _drop_if_stale(self) -> None:
        """Remove numba's cache index, and the work counted towards it, if it was saved
        for other ``sources`` than these."""
        index = self._index_path()
        if not self.sources or index is None or not os.path.exists(index):
            return
        if self._read("sources") != self._digest():
            with suppress(FileNotFoundError):
                os.remove(index)
            self._write("interpreted", None)

    def _stamp(self) -> None:
        """Once this process has compiled (numba has then saved the kernel): the
        ``sources`` digest is recorded and the interpreted work, paid off, is cleared."""
        index = self._index_path()
        if index is None or not os.path.exists(index):  # numba could not save it
            return
        if self.sources and self._read("sources") != (digest := self._digest()):
            self._write("sources", digest)
        if self._read("interpreted") is not None:
            self._write("interpreted", None)

    def _run_cached(self, args: tuple) -> bool:
        """Run the kernel if numba's disk cache holds its machine code, without compiling;
        whether it ran (the lookup takes about 30 ms, so a process makes it once)."""
        with event.install_listener("numba:compile", _NoCompiling()):
            try:
                self.kernel(*args)
            except _Refused:
                return False
        return True


def tiered(budget: float, sources: Sequence[ModuleType] = ()) -> Callable[[Dispatcher], Tiered]:
    """Decorator: the :class:`Tiered` kernel of a ``numba.njit(cache=True)`` function."""
    return lambda kernel: Tiered(kernel, budget, sources)


@tiered(budget=1.2e6, sources=[links])
@njit(cache=True)
def fair_share_rounds(sent, sizes, uplink, server, out):  # fmt: skip
    """:func:`gclab.network.links.fair_share` (compiled) of every profile and round:
    ``sent[p, r]`` are the sending times, ``sizes[p]`` the packet bytes. Profiles of one
    round mostly order their workers alike (a load shifts every delay), so an order is
    sorted anew only when it no longer sorts the times. Its work (:class:`Tiered`) is
    ``sent.size``, the flows."""
    n = sent.shape[2]
    order = np.arange(n)
    scratch = np.empty(n)
    for r in range(sent.shape[1]):
        for p in range(sent.shape[0]):
            if not _sorts(sent[p, r], order):
                order = np.argsort(sent[p, r], kind="mergesort")
            _fair_share(sent[p, r], sizes[p], uplink, server, order, out[p, r], scratch)


@_helper
def _sorts(values, order) -> bool:
    """Whether ``order`` is the stable sort of ``values`` (ties by index)."""
    for i in range(order.size - 1):
        a, b = values[order[i]], values[order[i + 1]]
        if a > b or (a == b and order[i] > order[i + 1]):
            return False
    return True
