"""Compiled loops of the fast parameter search (:mod:`gclab.sim.fast`), and what the
SGC kernel (:mod:`gclab.sim.sgc_kernels`) shares.

The static codes' rounds are numpy (:func:`gclab.sim.fast.round_stats`); compiled here
is the shared server link's processor sharing of every profile and round
(:func:`fair_share_rounds`), and the SGC kernel's helpers build on :data:`_helper` and
the bitset words ``ONE``/``ZERO``. Arguments shared with the SGC kernel:

* ``arrivals[l, r, w]``: arrival of worker ``w``'s packet in round ``r`` at load ``l``;
  ``close``, ``top``, ``late_bits``, ``late_count``: :func:`gclab.sim.fast.round_stats`
  of them (a late set is a bitset: ``words = ⌈n/64⌉`` ``uint64`` words, worker ``w`` is
  bit ``w % 64`` of word ``w // 64``); ``load_of[i]``: setting ``i``'s load;
* ``jobs``; ``rto_of[i]``, setting ``i``'s retransmission cycle (``network.rto`` plus
  its packet's time on the wire); ``wait_all`` (``network.recovery=wait_all``);
* outputs ``[settings, rounds]``: ``ran`` (the round ran), ``duration``, ``erased``,
  ``late``, ``sent`` (retransmission attempts), ``waited``; ``failed[i]`` is set when
  setting ``i`` needs a recovery that cannot succeed (the engine then reports it).

Compiled with numba and cached on disk (``cache=True``): the first run in a fresh
install compiles the kernels its search needs (:func:`gclab.sim.fast.load_kernels`),
later runs load the machine code. Compile time is kept down by what the kernels avoid:
numba's sorts and ``np.partition`` (numpy sorts outside, or
:func:`gclab.sim.sgc_kernels._stable_order`),
array-to-array slice assignments (element loops), and Python-callable wrappers of the
helpers (:data:`_helper`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from numba import njit
from numba.core import config

from gclab.network.links import fair_share

#: Compiles a function only the kernels call: no wrappers for calls from Python, and no
#: cache of its own (a cached kernel holds its helpers' machine code).
_helper = njit(no_cpython_wrapper=True, no_cfunc_wrapper=True)

_fair_share = _helper(fair_share)

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


@njit(cache=True)
def fair_share_rounds(sent, sizes, uplink, server, out):  # fmt: skip
    """:func:`gclab.network.links.fair_share` (compiled) of every profile and round:
    ``sent[p, r]`` are the sending times, ``sizes[p]`` the packet bytes. Profiles of one
    round mostly order their workers alike (a load shifts every delay), so an order is
    sorted anew only when it no longer sorts the times."""
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
