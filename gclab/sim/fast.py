"""Fast parameter search: a scheme's whole grid at once, in numpy or a compiled round loop.

:func:`gclab.sim.search.search` offers every full grid here first. For the four schemes
of the SGC papers (``uncoded``; ``classic_cr`` with an exact predicate, i.e. an
evaluation construction; ``sr_sgc``; ``m_sgc``) and IS-GC's ``is_cr`` and ``is_hr``, the
virtual clock and a delay model that loses nothing over the run (no first transmission
and no first retransmission attempt), numpy (the static codes) or a compiled round loop
(SGC: :mod:`gclab.sim.sgc_kernels`) computes every setting's rounds by the engine's rules;
anything else returns ``None`` and the search simulates each setting with
:func:`~gclab.sim.engine.simulate`, the ground truth this is tested against setting by
setting (``tests/sim/test_fast.py``). The speed comes from computing arrival times once
per distinct load and packet size for all rounds
(:meth:`~gclab.network.base.DelayModel.delays_by_load`, then the links of
:mod:`gclab.network.links`), building no scheme object per setting (each setting's load,
``T``, packet size and name are the scheme class's :meth:`~gclab.coding.contract.Scheme.shape`),
and a round costing a few passes over the ``n`` workers. Bytes change the arrivals and
each setting's retransmission cycle; server time adds the same seconds to every round
that runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from gclab.coding.contract import SCHEMES, Shape
from gclab.coding.evaluation import NODE_FAMILIES
from gclab.coding.sr_sgc import sr_sgc_stragglers
from gclab.coding.windows import Windows
from gclab.network import DelayModel, NetworkConfig
from gclab.network.draws import stream_seed
from gclab.network.links import Links
from gclab.sim.bitsets import BYTE_BITS, packed, words
from gclab.sim.engine import SimResult

Params = dict[str, Any]

#: Distinct (load, packet size) profiles whose arrival times are computed together
#: (profiles × rounds × n floats).
LOAD_BATCH = 32


@dataclass(frozen=True)
class Family:
    """The kernel that runs a scheme's settings (their shapes come from the scheme class)."""

    #: Runs the kernel: ``(arrivals, round stats, load_of, settings, jobs, network, out)``.
    run: Callable[..., None]
    #: A valid setting at ``n = 2`` (every parameter it needs), for :func:`load_kernels`.
    sample: Params
    #: Whether the config node (parameters outside the grid) is one the kernel models.
    accepts: Callable[[DictConfig], bool] = lambda node: True


class Records:
    """The kernels' per-round outputs for ``settings × rounds`` (see :mod:`gclab.sim.kernels`)."""

    def __init__(self, settings: int, rounds: int) -> None:
        self.ran = np.zeros((settings, rounds), dtype=bool)
        self.duration = np.zeros((settings, rounds))
        self.erased = np.zeros((settings, rounds), dtype=np.int64)
        self.late = np.zeros((settings, rounds), dtype=np.int64)
        self.sent = np.zeros((settings, rounds), dtype=np.int64)
        self.waited = np.zeros((settings, rounds), dtype=bool)
        self.failed = np.zeros(settings, dtype=bool)

    def rows(self, first: int, last: int) -> Records:
        """Rows ``first .. last − 1`` as records of their own: views the kernels write into."""
        part = object.__new__(Records)
        for key, value in vars(self).items():
            setattr(part, key, value[first:last])
        return part


def _gc(arrivals, stats, load_of, settings, jobs, network, cycle_of, out: Records) -> None:
    """Static codes deciding by ``≥ n − s`` packets (``uncoded``: ``s = 0``; ``classic_cr``),
    every round at once: a round decodes at its close when at most ``s`` packets are late
    (the model admits it too); otherwise ``wait_all`` takes every packet, and a retransmitting
    recovery waits for the ``(n − s)``-th arrival."""
    close, top, _, late_count = stats
    n = arrivals.shape[2]
    s = np.array([p.get("s", 0) for p in settings], dtype=np.int64)[:, None]
    rows, rounds = load_of[:, None], np.arange(jobs)
    stragglers = late_count[rows, rounds[None, :]]
    decodable = stragglers <= s
    if network.recovery == "wait_all":  # rejected: every packet
        recovered, erased = top[rows, rounds], 0
    else:
        kth = np.sort(arrivals[:, :jobs], axis=2)[rows, rounds, n - s - 1]
        recovered, erased = np.maximum(close[rows, rounds], kth), s
    out.ran[:, :jobs] = True
    out.late[:, :jobs] = stragglers
    out.duration[:, :jobs] = np.where(decodable, close[rows, rounds], recovered)
    out.erased[:, :jobs] = np.where(decodable, stragglers, erased)
    out.waited[:, :jobs] = ~decodable


def _windows(arrivals, stats, load_of, settings, jobs, network, cycle_of, out: Records) -> None:
    """IS-GC's repetition codes (``is_cr``, ``is_hr``), every round at once: a round decodes
    at its close when the windows in time tile the ``n`` partitions (the model admits it
    too); otherwise ``wait_all`` takes every packet, and a retransmitting recovery delivers
    late packets in time order until a tiling is in
    (:meth:`~gclab.coding.windows.Windows.completion`)."""
    close, top, _, late_count = stats
    n = arrivals.shape[2]
    for i, p in enumerate(settings):
        windows = Windows(n, p["c"], p.get("c1", 0), p.get("g", 1))
        row = load_of[i]
        times = arrivals[row, :jobs]
        done = windows.completion(times)  # [rounds]
        decodable = done <= close[row, :jobs]
        if network.recovery == "wait_all":  # rejected: every packet
            recovered, erased = top[row, :jobs], 0
        else:
            recovered, erased = done, _undelivered(windows, times, done, ~decodable)
        out.ran[i, :jobs] = True
        out.late[i, :jobs] = late_count[row, :jobs]
        out.duration[i, :jobs] = np.where(decodable, close[row, :jobs], recovered)
        out.erased[i, :jobs] = np.where(decodable, late_count[row, :jobs], erased)
        out.waited[i, :jobs] = ~decodable


def _undelivered(
    windows: Windows, times: np.ndarray, done: np.ndarray, waited: np.ndarray
) -> np.ndarray:
    """Packets not delivered when a round that waited ends at ``done``: those later, and
    those at ``done`` after the one that completes a tiling (ties go in by worker id, the
    order ``wanted`` names them)."""
    erased = np.count_nonzero(times >= done[:, None], axis=1)
    for r in np.flatnonzero(waited):
        arrived = times[r] < done[r]
        for w in np.flatnonzero(times[r] == done[r]):
            arrived[w] = True
            erased[r] -= 1
            if windows.tiles(arrived):
                break
    return erased


def _sgc(multiplexed: bool) -> Callable[..., None]:
    def run(arrivals, stats, load_of, settings, jobs, network, cycle_of, out: Records) -> None:
        from gclab.sim import sgc_kernels

        B, W, lam = (np.array([p[k] for p in settings], dtype=np.int64) for k in ("B", "W", "lam"))
        s = np.array(
            [sr_sgc_stragglers(p["B"], p["W"], p["lam"]) for p in settings], dtype=np.int64
        )
        rounds, n = arrivals.shape[1:]
        state = sgc_kernels.sgc_state(multiplexed, rounds, n, jobs, B, W)
        sgc_kernels.sgc_rounds(
            sgc_kernels.sgc_work(multiplexed, rounds, n, B, W),
            multiplexed, arrivals, *stats, load_of, B, W, lam, s, jobs, cycle_of,
            network.recovery == "wait_all", state, out.ran, out.duration, out.erased,
            out.late, out.sent, out.waited, out.failed,
        )  # fmt: skip

    return run


FAMILIES: dict[str, Family] = {
    "uncoded": Family(run=_gc, sample={}),
    "classic_cr": Family(
        run=_gc,
        sample={"s": 1, "construction": NODE_FAMILIES[0]},
        accepts=lambda node: node.get("construction") in NODE_FAMILIES,
    ),
    "is_cr": Family(run=_windows, sample={"c": 1}),
    "is_hr": Family(run=_windows, sample={"c": 1, "c1": 1, "g": 2}),
    "sr_sgc": Family(run=_sgc(multiplexed=False), sample={"B": 1, "W": 2, "lam": 1}),
    "m_sgc": Family(run=_sgc(multiplexed=True), sample={"B": 1, "W": 2, "lam": 1}),
}


def load_kernels(
    names: Iterable[str] | None = None,
    network: NetworkConfig | None = None,
    compile_missing: bool = True,
) -> None:
    """Import numba and load the machine code of the kernels that the fast path of schemes
    ``names`` (default: every family) needs under ``network`` (default: all of them, the
    shared server link's too). Kernels numba has not cached compile now when
    ``compile_missing``; otherwise they run interpreted until compiling pays
    (:class:`gclab.sim.kernels.Tiered`).

    Start-up, not search: the CLI and the benchmarks call this before timing a search.
    """
    from gclab.sim import kernels

    shared = network is None or network.server_bandwidth is not None
    links = NetworkConfig(server_bandwidth=1.0 if shared else None)
    with kernels.forced("compiled" if compile_missing else "auto"):
        for name in FAMILIES if names is None else names:
            family = FAMILIES.get(name)
            if family is not None:
                node = OmegaConf.create(family.sample)
                fast_results(name, node, 2, [family.sample], DelayModel(), links, 1, 0, 0.0, 1.0)


def fast_results(
    name: str,
    node: DictConfig,
    n: int,
    settings: list[Params],
    delay: DelayModel,
    network: NetworkConfig,
    jobs: int,
    seed: int,
    unit_time: float,
    payload_bytes: float,
) -> list[SimResult | None] | None:
    """Every setting's :class:`SimResult`, or ``None`` when the fast path does not apply.

    An entry is ``None`` for a setting whose run needs a recovery that cannot succeed:
    the engine, simulating it alone, then raises the error the user should see.
    """
    family = FAMILIES.get(name)
    if family is None or not settings or not family.accepts(node) or network.clock != "virtual":
        return None
    if delay.timed or delay.sized or network.recovery == "partial":  # the engine's business
        return None
    seed = stream_seed(seed, network.stream)  # the draws RoundProtocol would take
    fixed = {k: v for k, v in OmegaConf.to_container(node).items() if k != "_target_"}
    shapes = [SCHEMES[name].shape(n, **{**fixed, **p}) for p in settings]
    delays = [shape.T for shape in shapes]
    for T in dict.fromkeys(delays):  # the engine's check, in the order it would meet them
        delay.check(n, jobs + T)
    rounds = jobs + max(delays)
    if not lossless(delay, rounds, n, seed, max(delays)):
        return None
    links = network.links(payload_bytes)
    sizes = np.array([shape.packet_fraction * links.payload for shape in shapes])
    cycles = np.array([network.rto + links.alone(size) for size in sizes])
    profile = np.array([[shape.load for shape in shapes], sizes]).T
    profiles, profile_of = np.unique(profile, axis=0, return_inverse=True)
    profile_of = profile_of.reshape(-1)
    # settings in order of their profile, so that each batch's records are one slice
    order = np.argsort(profile_of, kind="stable")
    bounds = np.searchsorted(profile_of[order], np.arange(0, len(profiles), LOAD_BATCH))
    out = Records(len(settings), rounds)
    for batch, first in enumerate(range(0, len(profiles), LOAD_BATCH)):
        begin, end = bounds[batch], bounds[batch + 1] if batch + 1 < len(bounds) else len(order)
        rows = order[begin:end]
        arrivals = _arrivals(profiles[first : first + LOAD_BATCH], delay, links, rounds, n, seed,
                             unit_time)  # fmt: skip
        if network.latency:
            arrivals += network.latency
        stats = round_stats(arrivals, network)
        family.run(
            arrivals, stats, profile_of[rows] - first, [settings[i] for i in rows], jobs, network,
            cycles[rows], out.rows(begin, end),
        )  # fmt: skip
    server = float(network.server_time)
    return _results(shapes, n, jobs, out, order, server, sizes)


def _arrivals(
    profiles: np.ndarray,
    delay: DelayModel,
    links: Links,
    rounds: int,
    n: int,
    seed: int,
    unit_time: float,
) -> np.ndarray:
    """``[profiles, rounds, n]``: first transmissions' arrivals before the latency, per
    ``(load, packet size)`` profile, as the protocol computes them (compute + delay, the
    broadcast, the links)."""
    loads, sizes = profiles[:, 0], profiles[:, 1]
    sent = delay.delays_by_load(rounds, n, seed, loads)
    if not sent.flags.writeable:  # e.g. one draw broadcast to every load
        sent = np.array(sent)
    if unit_time:  # compute + delay, as the protocol adds them
        sent += unit_time * loads[:, None, None]
    broadcast = links.broadcast_time(n)
    if broadcast:
        sent += broadcast
    if not links.shared:
        for i, size in enumerate(sizes):
            row = sent[i]
            arrived = links.arrivals(row, size)
            if arrived is not row:  # the packet's time on the wire
                row[...] = arrived
        return sent
    from gclab.sim import kernels

    out = np.empty_like(sent)
    kernels.fair_share_rounds(out.size, sent, sizes, links.uplink, links.server, out)
    return out


def round_stats(arrivals: np.ndarray, network: NetworkConfig) -> tuple[np.ndarray, ...]:
    """``(close, last arrival, late bitsets, late count)`` per load and round."""
    last = arrivals.max(axis=2)
    close = (
        last
        if network.policy == "all"
        else np.minimum((1.0 + network.mu) * arrivals.min(axis=2), last)
    )
    late = packed(arrivals > close[..., None])
    late_count = BYTE_BITS[late].sum(axis=2, dtype=np.int64)  # an eighth of the flags
    return close, last, words(late), late_count


def lossless(delay: DelayModel, rounds: int, n: int, seed: int, T: int) -> bool:
    """Whether no first transmission and no first retransmission attempt of the run is lost.

    Recovery retransmits packets of the ``T`` rounds before the current one.
    """
    for r in range(rounds):
        if np.any(delay.lost(r, n, seed)):
            return False
        for packet_round in range(max(0, r - T), r):
            if np.any(delay.relost(r, packet_round, 1, n, seed)):
                return False
    return True


def _results(
    shapes: list[Shape],
    n: int,
    jobs: int,
    out: Records,
    order: np.ndarray,
    server: float,
    sizes: np.ndarray,
) -> list[SimResult | None]:
    """One :class:`SimResult` per setting, as the engine builds it (rounds run only); row
    ``k`` of ``out`` holds setting ``order[k]``. A result's arrays are views of arrays
    shared by every setting (read-only where several results share one)."""
    row_of = np.empty_like(order)
    row_of[order] = np.arange(len(order))
    count = out.ran.sum(axis=1)
    prefix = np.cumsum(~out.ran, axis=1)[np.arange(len(shapes)), np.maximum(count - 1, 0)] == 0
    rounds = out.ran.shape[1]
    durations = out.duration + server if server else out.duration
    sent_bytes = (n + out.sent) * sizes[order][:, None]
    numbers, lost = np.arange(rounds), np.zeros(rounds, dtype=np.int64)
    server_time, coverage = np.full(rounds, server), np.ones(rounds)
    for shared in (numbers, lost, server_time, coverage):
        shared.setflags(write=False)
    results: list[SimResult | None] = []
    for shape, k in zip(shapes, row_of.tolist()):
        if out.failed[k]:
            results.append(None)
            continue
        ran = int(count[k])
        rows = slice(0, ran) if prefix[k] else np.flatnonzero(out.ran[k])
        results.append(
            SimResult(
                scheme=shape.description,
                n=n,
                load=float(shape.load),
                jobs=jobs,
                index=numbers[rows],
                durations=durations[k, rows],
                erasures=out.erased[k, rows],
                lost=lost[:ran],
                late=out.late[k, rows],
                retransmissions=out.sent[k, rows],
                waited=out.waited[k, rows],
                server_time=server_time[:ran],
                bytes=sent_bytes[k, rows],
                coverage=coverage[:ran],
            )
        )
    return results
