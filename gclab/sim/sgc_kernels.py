"""Compiled round loop of SR-SGC and M-SGC settings for the fast search (:mod:`gclab.sim.fast`).

The arguments and outputs are those of :mod:`gclab.sim.kernels`. Sets of workers are
bitsets (:mod:`gclab.sim.bitsets`).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit
from numba.extending import overload

from gclab.sim import kernels
from gclab.sim.bitsets import bitsets
from gclab.sim.kernels import ONE, ZERO, _helper, tiered

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


def _popcount(x: np.uint64) -> int:
    """The set bits of a word: Python's own count when the kernel runs interpreted, the
    branch-free SWAR count (:func:`_swar_popcount`) compiled."""
    return int(x).bit_count()


@overload(_popcount)
def _compiled_popcount(x):
    return _swar_popcount


def _swar_popcount(x):  # unannotated: numba rejects the implementation with them
    x = x - ((x >> ONE) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return int((x * _H01) >> np.uint64(56))


@_helper
def _count(bits: np.ndarray) -> int:
    total = 0
    for k in range(bits.size):
        total += _popcount(bits[k])
    return total


@_helper
def _any(bits: np.ndarray) -> bool:
    for k in range(bits.size):  # noqa: SIM110 (numba compiles loops, not generators)
        if bits[k] != ZERO:
            return True
    return False


@_helper
def _lowest(bits: np.ndarray, k: int, out: np.ndarray) -> int:
    """``out |=`` the ``k`` lowest workers of ``bits`` (all if fewer); returns how many."""
    taken = 0
    for word in range(bits.size):
        x = bits[word]
        while x != ZERO and taken < k:
            low = x & (~x + ONE)
            out[word] |= low
            x ^= low
            taken += 1
    return taken


@_helper
def _workers(bits: np.ndarray, out: np.ndarray) -> int:
    """The workers of ``bits`` into ``out``, ascending; returns how many."""
    size = 0
    for word in range(bits.size):
        x = bits[word]
        while x != ZERO:
            low = x & (~x + ONE)
            out[size] = 64 * word + _popcount(low - ONE)
            x ^= low
            size += 1
    return size


@_helper
def _sent(end: float, base: float, rto: float, count: int) -> int:
    """Attempts sent before ``end`` by ``count`` retransmissions that succeed at attempt 1."""
    return count * min(1, max(0, math.ceil((end - base) / rto - 1e-9)))


@_helper
def _admits(marks: np.ndarray, late: np.ndarray, r: int, B: int, W: int, lam: int) -> bool:
    """The ``(B, W, λ)`` check of round ``r`` against the marks of the rounds before it."""
    count = 0
    for k in range(late.size):
        recent = ZERO
        older = ZERO
        for q in range(max(0, r + 1 - W), r):
            recent |= marks[q, k]
            if q <= r - B:
                older |= marks[q, k]
        if older & late[k] != ZERO:
            return False
        count += _popcount(recent | late[k])
    return count <= lam


@_helper
def _stable_order(values: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` by insertion (ties keep their order), into
    ``order``: a few late packets per round, and far cheaper to compile than numba's sorts."""
    order = order[: values.size]
    for i in range(values.size):
        order[i] = i
    for i in range(1, values.size):
        k, j = order[i], i
        while j > 0 and values[order[j - 1]] > values[k]:
            order[j] = order[j - 1]
            j -= 1
        order[j] = k
    return order


@_helper
def _deliveries(
    arrivals_r, current, previous, base, rto, workers, late_times, by_time, order, times
):
    """Recovery events in the protocol's order; returns their number.

    ``previous`` (packets of earlier rounds, in ``decoder.wanted`` order) are resent and
    all arrive at ``base + rto``; ``current`` (late packets of this round) arrive at
    their times. Events go by time, then by their place in ``wanted``, where every
    earlier-round packet comes first. ``order[e]`` is ``w + 1`` for a packet of this
    round and ``−(w + 1)`` for a resent one, ``times[e]`` its arrival.
    """
    late = _workers(current, workers)
    for k in range(late):
        late_times[k] = arrivals_r[workers[k]]
    by_time = _stable_order(late_times[:late], by_time)
    arrive = base + rto
    size = 0
    k = 0
    while k < late and late_times[by_time[k]] < arrive:
        order[size] = workers[by_time[k]] + 1
        times[size] = late_times[by_time[k]]
        size += 1
        k += 1
    for w in previous:
        order[size] = -(w + 1)
        times[size] = arrive
        size += 1
    while k < late:
        order[size] = workers[by_time[k]] + 1
        times[size] = late_times[by_time[k]]
        size += 1
        k += 1
    return size


def sgc_state(
    multiplexed: bool, rounds: int, n: int, jobs: int, B_of: np.ndarray, W_of: np.ndarray
) -> tuple:
    """The work arrays of :func:`sgc_rounds` for these settings, allocated by numpy (each
    ``np.zeros`` a kernel calls would compile anew)."""
    T_of = W_of - 2 + B_of if multiplexed else B_of
    slots, words, sized = 1 + int(T_of.max()), (n + 63) // 64, int(multiplexed)
    chunks, groups_max = (int(W_of.max()) - 1) * sized, int(B_of.max()) * sized
    bits = functools.partial(np.zeros, dtype=np.uint64)
    sr = (
        bits((rounds * (1 - sized), words)),  # repeat
        bits((jobs * (1 - sized), words)),  # have
    )  # the other scheme's state stays empty
    m = (
        bits((rounds, slots * sized, words)),  # retry
        bits((rounds, slots * sized, chunks, words)),  # chunk
        bits((jobs, chunks, words)),  # missing
        bits((jobs, groups_max, words)),  # d2
        np.zeros((jobs, groups_max), dtype=np.int64),  # d2_count
    )
    events, ints = (slots + 1) * n, functools.partial(np.zeros, dtype=np.int64)
    return (
        T_of,  # delays
        bitsets(np.ones(n, dtype=bool)),  # valid
        sr,
        m,
        bits((rounds, words)),  # got
        bits((rounds, words)),  # marks
        np.zeros(jobs, dtype=np.bool_),  # decoded
        bits(words),  # on_time
        bits(words),  # current
        bits(words),  # one
        bits((3, words)),  # scratch
        ints(n),  # workers
        ints(slots * n),  # previous
        ints(slots * n),  # previous_round
        np.zeros(n),  # late_times
        ints(n),  # by_time
        ints(events),  # order
        np.zeros(events),  # times
    )


def sgc_work(multiplexed: bool, rounds: int, n: int, B_of: np.ndarray, W_of: np.ndarray) -> float:
    """The work of :func:`sgc_rounds` on these settings (:class:`~gclab.sim.kernels.Tiered`'s
    units): per setting and round, one plus the bitset words its packets update (one
    slot a round for SR-SGC, ``T + 1`` for M-SGC)."""
    slots = W_of - 1 + B_of if multiplexed else np.ones_like(B_of)
    return float(rounds * (1 + (n + 63) // 64 * slots).sum())


@tiered(budget=1.5e6, sources=[kernels])  # its helpers' constants ONE and ZERO
@njit(cache=True)
def sgc_rounds(
    multiplexed, arrivals, close, top, late_bits, late_count, load_of, B_of, W_of, lam_of, s_of,
    jobs, rto_of, wait_all, state, ran, duration, erased, late, sent, waited, failed,
):  # fmt: skip
    """SR-SGC (``multiplexed=False``) or M-SGC settings: the protocol's round, once.

    ``state`` is :func:`sgc_state` of the settings. The decoders' plans and bookkeeping
    are the ``_sr_*`` and ``_m_*`` helpers, on state shared by both (``got``: packets
    received per round; ``marks``: straggler marks of ``wait_all``; ``decoded`` per job)
    and their own:

    * SR-SGC (:class:`~gclab.coding.sgc.SRSGCDecoder`, :class:`~gclab.coding.sgc.SRSGCModel`):
      ``repeat[r]``, the workers that repeat job ``r − B`` in round ``r`` (the others
      compute job ``r``); ``have[j]``, the workers whose job-``j`` result arrived.
    * M-SGC (:class:`~gclab.coding.sgc.MSGCDecoder`, :class:`~gclab.coding.sgc.MSGCModel`):
      slot ``m`` of round ``r`` serves job ``r − m``; slots ``< W − 1`` are D1 chunk ``m``
      for every worker; in a later slot ``retry`` holds the workers that redo a D1 chunk
      (``chunk[c]``: those redoing chunk ``c``), the others run D2 group ``m − W + 1``.
      Per job, ``missing[c]``: workers whose chunk ``c`` has not arrived; ``d2[g]``:
      workers whose group-``g`` result has, ``d2_count[g]`` of them.
    """
    n = arrivals.shape[2]
    (
        delays, valid, sr, m, got, marks, decoded, on_time, current, one, scratch, workers,
        previous, previous_round, late_times, by_time, order, times,
    ) = state  # fmt: skip
    words = valid.size
    sized = 1 if multiplexed else 0
    for i in range(B_of.size):
        B, W, lam, load, T = B_of[i], W_of[i], lam_of[i], load_of[i], delays[i]
        rto = rto_of[i]
        quorum = n - (lam if multiplexed else s_of[i])  # results a GC-coded part needs
        groups = B if multiplexed and lam < n else 0
        got[:] = ZERO
        marks[:] = ZERO
        decoded[:] = False
        if multiplexed:
            _m_reset(m, valid, W, jobs)
        else:
            sr[1][:] = ZERO
        low = 0  # every job below it is decoded
        for r in range(jobs + T):
            if multiplexed:
                serves = _m_plan(m, decoded, scratch, r, T, W, groups, lam, jobs)
            else:
                serves = _sr_plan(sr, decoded, valid, scratch, r, B, s_of[i], jobs)
            if not serves and not (multiplexed and wait_all):  # papers' M-SGC: all J + T
                continue
            ran[i, r] = True
            stragglers = late_count[load, r]
            for k in range(words):
                on_time[k] = valid[k] & ~late_bits[load, r, k]
            _receive(multiplexed, sr, m, got, decoded, on_time, r, B, T, W, groups, jobs)
            delivered = n - stragglers
            end = close[load, r]
            if wait_all:
                if _admits(marks, late_bits[load, r], r, B, W, lam):
                    exempt = not multiplexed and stragglers <= s_of[i]
                    for k in range(words * (1 - sized)):  # SR-SGC: nobody repeated
                        if on_time[k] & sr[0][r, k] != ZERO:
                            exempt = False
                    if not exempt:
                        for k in range(words):
                            marks[r, k] = late_bits[load, r, k]
                elif stragglers > 0:  # rejected: every packet
                    _receive(multiplexed, sr, m, got, decoded, late_bits[load, r], r, B, T, W,
                             groups, jobs)  # fmt: skip
                    delivered = n
                    end = top[load, r]
                    waited[i, r] = True
            due = r - T
            ready = _ready(multiplexed, sr, m, due, W, groups, quorum) if due >= 0 else True
            if due >= 0 and not decoded[due] and not ready:
                if multiplexed:
                    resent = _m_wanted(m, got, valid, current, workers, previous, previous_round,
                                       due, r, T, W, groups, quorum)  # fmt: skip
                else:
                    resent = _sr_wanted(sr, got, valid, current, scratch, previous,
                                        previous_round, due, r)  # fmt: skip
                size = _deliveries(
                    arrivals[load, r], current, previous[:resent], end, rto, workers, late_times,
                    by_time, order, times,
                )  # fmt: skip
                base = end
                done = False
                later = 0  # resent packets delivered so far, in wanted order
                for e in range(size):
                    w = abs(order[e]) - 1
                    packet_round = r
                    if order[e] < 0:
                        packet_round = previous_round[later]
                        later += 1
                    one[:] = ZERO
                    one[w >> 6] = ONE << np.uint64(w & 63)
                    _receive(multiplexed, sr, m, got, decoded, one, packet_round, B, T, W, groups,
                             jobs)  # fmt: skip
                    end = max(base, times[e])
                    if packet_round == r:
                        delivered += 1
                        waited[i, r] = True
                    if _ready(multiplexed, sr, m, due, W, groups, quorum):
                        done = True
                        break
                if not done:
                    failed[i] = True
                    break
                sent[i, r] = _sent(end, base, rto, resent)
            for j in range(low, min(r + 1, jobs)):
                if not decoded[j] and _ready(multiplexed, sr, m, j, W, groups, quorum):
                    decoded[j] = True
            while low < jobs and decoded[low]:
                low += 1
            duration[i, r] = end
            erased[i, r] = n - delivered
            late[i, r] = stragglers


@_helper
def _receive(multiplexed, sr, m, got, decoded, packets, r, B, T, W, groups, jobs) -> None:
    """Deliver ``packets`` of round ``r``: what each carries counts once (``record``)."""
    for k in range(packets.size):
        got[r, k] |= packets[k]
    if not multiplexed:  # job r from most, job r − B from the repeaters
        repeat, have = sr
        for k in range(packets.size):
            if r < jobs and not decoded[r]:
                have[r, k] |= packets[k] & ~repeat[r, k]
            if r - B >= 0 and not decoded[r - B]:
                have[r - B, k] |= packets[k] & repeat[r, k]
        return
    retry, chunk, missing, d2, d2_count = m
    for slot in range(T + 1):
        job = r - slot
        if job < 0 or job >= jobs or decoded[job]:
            continue
        for k in range(packets.size):
            if slot < W - 1:
                missing[job, slot, k] &= ~packets[k]
                continue
            for c in range(W - 1):
                missing[job, c, k] &= ~(packets[k] & chunk[r, slot, c, k])
            if groups:
                fresh = packets[k] & ~retry[r, slot, k] & ~d2[job, slot - (W - 1), k]
                d2[job, slot - (W - 1), k] |= fresh
                d2_count[job, slot - (W - 1)] += _popcount(fresh)


@_helper
def _ready(multiplexed, sr, m, job, W, groups, quorum) -> bool:
    """Whether ``job`` is decodable: ``n − s`` results (SR-SGC); every D1 chunk and ``n − λ``
    results per D2 group (M-SGC, ``MSGCDecoder._ready``)."""
    if not multiplexed:
        return _count(sr[1][job]) >= quorum
    missing, d2_count = m[2], m[4]
    for c in range(W - 1):
        if _any(missing[job, c]):
            return False
    for g in range(groups):  # noqa: SIM110 (numba compiles loops, not generators)
        if d2_count[job, g] < quorum:
            return False
    return True


@_helper
def _sr_plan(sr, decoded, valid, scratch, r, B, s, jobs) -> bool:
    """Freeze round ``r``: ``v > s`` workers missing job ``r − B`` → ``v − s`` of them
    repeat it (never computed it first, then lowest id). Returns whether it serves."""
    repeat, have = sr
    repeat[r] = ZERO
    job = r - B
    if job >= 0 and not decoded[job]:
        idle, lost = scratch[0], scratch[1]
        for k in range(valid.size):
            idle[k] = repeat[job, k]
            lost[k] = valid[k] & ~repeat[job, k] & ~have[job, k]
        extra = _count(idle) + _count(lost) - s
        if extra > 0:
            extra -= _lowest(idle, extra, repeat[r])
            _lowest(lost, extra, repeat[r])
    return r < jobs or _any(repeat[r])  # job r exists, or somebody repeats


@_helper
def _sr_wanted(sr, got, valid, current, scratch, previous, previous_round, job, r) -> int:
    """``SRSGCDecoder.wanted``: round ``job``'s missing packets (resent; returns how many)
    into ``previous``, round ``r``'s missing repeats into ``current``."""
    repeat, have = sr
    lost = scratch[1]
    for k in range(valid.size):
        lost[k] = valid[k] & ~repeat[job, k] & ~have[job, k] & ~got[job, k]
        current[k] = repeat[r, k] & ~have[job, k] & ~got[r, k]
    resent = _workers(lost, previous)
    previous_round[:resent] = job
    return resent


@_helper
def _m_reset(m, valid, W, jobs) -> None:
    missing, d2, d2_count = m[2], m[3], m[4]
    for j in range(jobs):
        for c in range(W - 1):
            for k in range(valid.size):
                missing[j, c, k] = valid[k]
    d2[:] = ZERO
    d2_count[:] = 0


@_helper
def _m_plan(m, decoded, scratch, r, T, W, groups, lam, jobs) -> bool:
    """Freeze round ``r``: in a D2 slot, at most ``λ`` workers missing a D1 chunk of the
    slot's job redo one (lowest ids; the slot's own chunk first, else the earliest).
    Returns whether the round serves a job not decoded yet."""
    retry, chunk, missing = m[0], m[1], m[2]
    budget = lam if groups else missing.shape[2] * 64
    any_missing, assigned = scratch[0], scratch[1]
    serves = False
    for slot in range(T + 1):
        job = r - slot
        retry[r, slot] = ZERO
        chunk[r, slot] = ZERO
        live = 0 <= job < decoded.size and not decoded[job]
        if slot >= W - 1 and live:
            group = slot - (W - 1)
            for k in range(any_missing.size):
                any_missing[k] = ZERO
                assigned[k] = ZERO
                for c in range(W - 1):
                    any_missing[k] |= missing[job, c, k]
            _lowest(any_missing, budget, retry[r, slot])
            for c in range(-1, W - 1):
                c = group if c < 0 else c
                if c < W - 1:
                    for k in range(any_missing.size):
                        take = retry[r, slot, k] & ~assigned[k] & missing[job, c, k]
                        chunk[r, slot, c, k] |= take
                        assigned[k] |= take
        if live and (slot < W - 1 or groups > 0 or _any(retry[r, slot])):
            serves = True
    return serves


@_helper
def _m_wanted(
    m, got, valid, current, workers, previous, previous_round, job, r, T, W, groups, quorum
) -> int:
    """``MSGCDecoder.wanted``: missing D1 chunks and short D2 groups, by round then worker.
    Earlier rounds' packets (resent; returns how many) go to ``previous``, round ``r``'s
    to ``current``."""
    retry, chunk, missing, d2_count = m[0], m[1], m[2], m[4]
    resent = 0
    for slot in range(T + 1):
        rr = job + slot
        for k in range(valid.size):
            if slot < W - 1:
                current[k] = missing[job, slot, k]
            else:
                current[k] = ZERO
                for c in range(W - 1):
                    current[k] |= chunk[rr, slot, c, k] & missing[job, c, k]
                if groups and d2_count[job, slot - (W - 1)] < quorum:
                    current[k] |= valid[k] & ~retry[rr, slot, k]
            current[k] &= ~got[rr, k]
        if rr < r:
            found = _workers(current, workers)
            for e in range(found):
                previous[resent + e] = workers[e]
            previous_round[resent : resent + found] = rr
            resent += found
    return resent
