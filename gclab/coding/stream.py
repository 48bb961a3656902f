"""Codes across time on packets of blocks of workers: the machinery of the pipelined codes.

A :class:`StreamScheme` is a code whose round-``τ`` packets mix the partial gradients of
jobs ``τ−T .. τ`` (:mod:`gclab.coding.pipelined` builds the two of gclab: CR and FR).
Per *block* (CR: all workers; FR: one group) and per round, a few *equations* (packet
weights, coefficients over the lags ``0..T``); the decoder keeps the system of the
rounds whose jobs are not all decoded, over the undecoded jobs, decodes every job whose
unit vector is in the row space (as early as possible, in any order), and moves decoded
jobs to the right-hand side. Coefficients are cached per erasure pattern (relative to
the oldest undecoded job) and each solve is guarded by a residual check. The tolerance
predicate runs the same rank test on the window, so it is exact: it *is* decodability.
Plans are static (every worker computes the new job's parts), so the round hook
(:meth:`~gclab.coding.contract.Decoder.begin_round`) keeps its default.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gclab.coding.contract import Decoder, Encoder, Part, Plan, Scheme, Task
from gclab.coding.numerics import RESIDUAL_TOL, Outputs
from gclab.coding.sums import combine, compile_sums
from gclab.errors import DecodeError

#: Row-space membership: ``1 − ‖projection‖² ≤ SPAN_TOL``, i.e. ‖residual‖ ≤ 1e-6 (exact
#: members give ~1e-16; between 1e-8 and 1e-6 the residual check raises, as for the
#: static codes in :meth:`LinearScheme.decoding_weights`).
SPAN_TOL = 1e-12

#: Relative singular-value cut-off of the job-space solves.
RANK_RCOND = 1e-10

#: A decode from the first equations only (fewer packets to read) is taken when its summed
#: absolute weights are at most this times the minimum-norm solution's.
SPARSE_SLACK = 1.25

Equations = tuple[np.ndarray, np.ndarray]
"""``(weights [E, |F|], lags [E, T+1])`` of one block's received packets in one round."""


class _RowSpace:
    """Minimum-norm solutions of ``Mᵀ v = e_c`` for the columns ``c`` in the row space of M."""

    def __init__(self, system: np.ndarray) -> None:
        u, sv, vt = np.linalg.svd(system, full_matrices=False)
        rank = int(np.count_nonzero(sv > RANK_RCOND * sv[0])) if sv.size else 0
        self.u, self.sv, self.vt = u[:, :rank], sv[:rank], vt[:rank]

    def solve(self, col: int) -> np.ndarray | None:
        projected = self.vt[:, col]  # coordinates of e_col in the row space basis
        if abs(1.0 - float(projected @ projected)) > SPAN_TOL:
            return None
        return self.u @ (projected / self.sv)


@dataclass(frozen=True)
class Solution:
    """Decoding of one block's pattern: which jobs decode, and how.

    Indices are relative to the decoder's window: round offset ``o`` is round
    ``base + o`` and column ``c`` is job ``base − T + c`` (``base``: oldest undecoded job).
    For each decodable column: the packet weights ``{(round offset, block position):
    weight}`` and the coefficients of already known block values ``{column: coef}``.
    """

    decodable: frozenset[int]
    packets: dict[int, dict[tuple[int, int], float]]
    known: dict[int, dict[int, float]]


class StreamScheme(Scheme):
    """A pipelined scheme: blocks of workers, per-round equations over ``T + 1`` lags.

    Subclasses set ``n, s, T``, ``blocks`` (each block a run of consecutive worker ids),
    ``lag_coefficients`` (``[n, n, T+1]``: ``G_k[j, w]`` as ``[w, j, k]``) and implement
    :meth:`equations`.
    """

    blocks: tuple[tuple[int, ...], ...]
    lag_coefficients: np.ndarray

    def _init_stream(self, n: int, s: int, T: int) -> None:
        self.n, self.s, self.T = n, s, T
        self.parts = tuple(Part(j) for j in range(n))
        self.placement = tuple(
            tuple(int(j) for j in np.flatnonzero(np.any(self.lag_coefficients[w] != 0, axis=1)))
            for w in range(n)
        )
        self._equations: dict[tuple[int, ...], Equations] = {}
        self._solutions: dict[tuple, Solution] = {}
        self._tolerated: dict[bytes, bool] = {}

    @property
    def load(self) -> float:
        return max(len(p) for p in self.placement) / len(self.parts)

    def equations_for(self, received: tuple[int, ...]) -> Equations:
        """Cached :meth:`equations` for block positions ``received`` (ascending)."""
        if received not in self._equations:
            self._equations[received] = self.equations(received)
        return self._equations[received]

    @abstractmethod
    def equations(self, received: tuple[int, ...]) -> Equations:
        """Equations of one round from the block positions that arrived (ascending).

        At most ``T + 1`` rows: their lag coefficients must span everything the received
        packets say about the jobs, once the interference is eliminated.
        """

    def solution(self, masks: tuple[int, ...], known: frozenset[int], zeros: int) -> Solution:
        """Cached :class:`Solution` of one block: ``masks[o]`` = positions received in round
        offset ``o``; ``known`` = columns of decoded jobs; the first ``zeros`` columns are
        jobs before job 0 (they do not exist: value 0)."""
        key = (masks, known, zeros)
        if key not in self._solutions:
            self._solutions[key] = self._solve(*key)
        return self._solutions[key]

    def _solve(self, masks: tuple[int, ...], known: frozenset[int], zeros: int) -> Solution:
        """Every undecoded job whose unit vector lies in the row space of the equations,
        with the decoded jobs on the right-hand side.

        The minimum-norm solution over all equations, unless the first equations (in
        round order) already decode the job with weights no larger (within
        :data:`SPARSE_SLACK`, summed absolute weights, which bound how much the packets'
        rounding can grow): then those. Without loss that is one equation of the job's
        own round, so a decode reads fewer packets (FR: one of each group's; CR: ``K`` of
        round ``t``'s, where the minimum norm spreads over ``K + 1``).
        """
        T = self.T
        width = len(masks) + T
        rows, sources = [], []  # sources: (round offset, positions, packet weights)
        for offset, mask in enumerate(masks):
            received = tuple(i for i in range(mask.bit_length()) if mask >> i & 1)
            weights, lags = self.equations_for(received)
            for e in range(len(lags)):
                row = np.zeros(width)
                row[offset : offset + T + 1] = lags[e, ::-1]  # lag k -> column offset + T - k
                rows.append(row)
                sources.append((offset, received, weights[e]))
        existing = list(range(zeros, width))
        unknown = [c for c in existing if c not in known]
        if not rows or not unknown:
            return Solution(frozenset(), {}, {})
        system = np.array(rows)
        spaces = {len(rows): _RowSpace(system[:, unknown])}  # by number of equations used
        packets, coefs = {}, {}
        for col in unknown:
            full = spaces[len(rows)].solve(unknown.index(col))
            if full is None:
                continue
            best = self._terms(system, sources, existing, known, unknown, col, full, strict=True)
            for count in range(1, len(rows)):
                if count not in spaces:
                    spaces[count] = _RowSpace(system[:count, unknown])
                v = spaces[count].solve(unknown.index(col))
                if v is not None:
                    v = np.concatenate([v, np.zeros(len(rows) - count)])
                    sparse = self._terms(system, sources, existing, known, unknown, col, v)
                    if sparse is not None and sparse[2] <= SPARSE_SLACK * best[2]:
                        best = sparse
                    break
            packets[col], coefs[col] = best[0], best[1]
        return Solution(frozenset(packets), packets, coefs)

    def _terms(
        self,
        system: np.ndarray,
        sources: list,
        existing: list[int],
        known: frozenset[int],
        unknown: list[int],
        col: int,
        v: np.ndarray,
        strict: bool = False,
    ) -> tuple[dict[tuple[int, int], float], dict[int, float], float] | None:
        """``(packet weights, known coefficients, their summed absolute value)`` of the
        equation combination ``v`` decoding column ``col``, residual-checked: a failure
        raises with ``strict``, else gives ``None``."""
        residual = system.T @ v
        residual[col] -= 1.0
        error = float(np.max(np.abs(residual[unknown])))
        if not np.isfinite(error) or error > RESIDUAL_TOL:
            if not strict:
                return None
            raise DecodeError(
                f"{self.describe()}: decoding a job from {system.shape[1] - self.T} rounds "
                f"fails the residual check ({error:.2e} > {RESIDUAL_TOL:.0e})."
            )
        weights: dict[tuple[int, int], float] = {}
        for coef, (offset, received, eq_weights) in zip(v, sources):
            for pos, wt in zip(received, eq_weights):
                if wt != 0 and coef != 0:
                    weights[offset, pos] = weights.get((offset, pos), 0.0) + coef * wt
        known_coefs = {c: -float(residual[c]) for c in existing if c in known and residual[c] != 0}
        size = sum(abs(w) for w in weights.values()) + sum(abs(c) for c in known_coefs.values())
        return weights, known_coefs, size

    def tolerates(self, erasures: np.ndarray) -> bool:
        """Exact: job 0 decodes from rounds ``0..T`` of ``erasures`` (earlier jobs known)."""
        erased = np.asarray(erasures, dtype=bool).reshape(-1, self.n)
        key = erased.tobytes() + bytes([erased.shape[0]])
        if key not in self._tolerated:
            decoder = self.decoder()
            for r, row in enumerate(erased[: self.T + 1]):
                for w in np.flatnonzero(~row).tolist():
                    decoder.receive(r, w, None)
            self._tolerated[key] = 0 in decoder.decodable()
        return self._tolerated[key]

    def encoder(self, worker: int) -> Encoder:
        return AccumulatingEncoder(self.lag_coefficients[worker], self.T)

    def decoder(self, grad_size: int | None = None) -> Decoder:
        return StreamDecoder(self, grad_size)


class AccumulatingEncoder(Encoder):
    """Worker state (docs/design.md, "Codes across time"): ``T + 1`` running accumulators.

    After computing job ``τ`` it adds ``G_k[j, w]·g_j(τ)`` into ``acc[k]``, sends ``acc[0]``
    and shifts: memory ``(T + 1)·l``, never the raw partials of earlier jobs. A packet
    the master needs again is recomputed or retransmitted by the runtime, not kept here.
    The accumulators keep the partials' dtype (float64 ones would double that memory), so
    at ``T = 0`` a packet can differ from the classic encoder's, which rounds a float64
    sum once, by one float32 rounding.
    """

    def __init__(self, coefficients: np.ndarray, T: int) -> None:
        self.coefficients = coefficients  # [k (parts), T+1]
        self.T = T
        self.acc: list[np.ndarray] | None = None

    def encode(self, round: int, partials: Mapping[Task, np.ndarray]) -> np.ndarray:
        if not partials:
            raise DecodeError(f"round {round}: worker has no partial gradients to encode.")
        if self.acc is None:
            first = next(iter(partials.values()))
            self.acc = [np.zeros_like(first) for _ in range(self.T + 1)]
        for task, grad in partials.items():
            for k in range(self.T + 1):
                coef = self.coefficients[task.part, k]
                if coef != 0:
                    self.acc[k] += grad * grad.dtype.type(coef)
        packet = self.acc.pop(0)
        self.acc.append(np.zeros_like(packet))
        return packet

    def state_dict(self) -> dict[str, Any]:
        """The accumulators (``None`` before the first round)."""
        return {"acc": self.acc}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Copies: arrays that came through Ray's object store are read-only."""
        self.acc = None if state["acc"] is None else [np.array(a) for a in state["acc"]]


class StreamDecoder(Decoder):
    """Master side of a :class:`StreamScheme` (see the module docstring).

    Keeps the packets of rounds ``>= base`` (the oldest undecoded job: earlier rounds
    only involve decoded jobs) and, per block, the decoded values of jobs ``>= base − T``
    that those rounds still involve, in the packets' dtype: float32 values of float32
    packets, each accumulated in float64 and rounded once. A kept value's rounding enters
    a later decode as the packets' own rounding does, through coefficients that the lag
    scale keeps contractive (:func:`gclab.coding.pipelined.lag_scale`), and float32 state
    halves what a decode reads (tested over long lossy runs against float64 state).
    """

    STATE = ("base", "decoded", "masks", "packets", "values")

    def __init__(self, scheme: StreamScheme, grad_size: int | None) -> None:
        super().__init__(scheme, grad_size)
        self.scheme: StreamScheme = scheme
        self.base = 0
        self.decoded: set[int] = set()  # decoded jobs >= base (out of order)
        self.masks: dict[int, int] = {}  # round -> bitmask of workers received
        self.packets: dict[int, dict[int, np.ndarray | None]] = {}  # in arrival order
        self.values: list[dict[int, np.ndarray]] = [{} for _ in scheme.blocks]
        # each block keeps T + 1 values; a round decodes up to T + 1 jobs
        self.outputs = Outputs(limit=(len(scheme.blocks) + 1) * (scheme.T + 2) + 2)
        if not self.symbolic:  # the decodes' kernels are loaded now, not on a clock
            compile_sums(np.ones((1, len(scheme.blocks[0]) + scheme.T)))  # a block's value
            compile_sums(np.ones((1, len(scheme.blocks))))  # FR: the groups' sum

    def plan(self, round: int) -> Plan:
        return tuple(tuple(Task(round, j) for j in parts) for parts in self.scheme.placement)

    def receive(self, round: int, worker: int, packet: np.ndarray | None) -> None:
        if round < self.base or worker in self.packets.get(round, {}):
            return
        self.packets.setdefault(round, {})[worker] = packet
        self.masks[round] = self.masks.get(round, 0) | (1 << worker)

    def _solutions(self) -> list[Solution]:
        """One :class:`Solution` per block for the current window."""
        if not self.masks:
            return [Solution(frozenset(), {}, {}) for _ in self.scheme.blocks]
        T = self.scheme.T
        first = self.base - T  # job of column 0
        rounds = range(self.base, max(self.masks) + 1)
        known = {j - first for j in range(max(0, first), self.base)}
        known |= {j - first for j in self.decoded}
        zeros = max(0, -first)
        out = []
        for block in self.scheme.blocks:
            start, full = block[0], (1 << len(block)) - 1
            masks = [self.masks.get(r, 0) >> start & full for r in rounds]
            while masks and not masks[-1]:
                masks.pop()
            width = len(masks) + T
            cut = frozenset(c for c in known if c < width)
            out.append(self.scheme.solution(tuple(masks), cut, min(zeros, width)))
        return out

    def decodable(self) -> list[int]:
        first = self.base - self.scheme.T
        common = frozenset.intersection(*(s.decodable for s in self._solutions()))
        return sorted(first + c for c in common)

    def decode(self, job: int) -> np.ndarray | None:
        solutions = self._solutions()
        col = job - (self.base - self.scheme.T)
        if job < self.base or job in self.decoded or not all(col in s.decodable for s in solutions):
            raise DecodeError(f"job {job} is not decodable from the packets received so far.")
        result = None if self.symbolic else self._combine(solutions, col)
        self.decoded.add(job)
        while self.base in self.decoded:
            self.decoded.discard(self.base)
            self.base += 1
        for r in [r for r in self.masks if r < self.base]:
            del self.masks[r], self.packets[r]
        for values in self.values:
            for old in [j for j in values if j < self.base - self.scheme.T]:
                del values[old]
        return result

    def _combine(self, solutions: list[Solution], col: int) -> np.ndarray:
        """Apply the solutions' weights to the packets and known block values."""
        first = self.base - self.scheme.T
        per_block = []
        for block, values, solution in zip(self.scheme.blocks, self.values, solutions):
            terms, arrival = [], {}
            for (offset, pos), weight in solution.packets[col].items():
                packets = self.packets[self.base + offset]
                if offset not in arrival:
                    arrival[offset] = {w: i for i, w in enumerate(packets)}
                worker = block[pos]
                terms.append(((offset, arrival[offset][worker]), packets[worker], weight))
            for c, coef in solution.known[col].items():
                terms.append(((-1, c), values[first + c], coef))
            terms.sort(key=lambda t: t[0])  # round, then arrival order (= classic at T = 0)
            per_block.append(terms)
        if self.scheme.T == 0:  # nothing refers to this job later: one sum over all
            per_block = [sorted((t for b in per_block for t in b), key=lambda t: t[0])]
        size, outputs = self.grad_size, self.outputs
        sums = [
            combine([t[1] for t in terms], np.array([[t[2] for t in terms]]), size, outputs)
            for terms in per_block
        ]
        if self.scheme.T == 0:  # one sum over all blocks
            return sums[0]
        for values, value in zip(self.values, sums):
            values[first + col] = value
        if len(sums) == 1:  # CR: the value is the result, read-only: the decoder still uses it
            view = sums[0].view()
            view.flags.writeable = False
            return view
        # FR: the groups' sum, accumulated in float64 (a pass per sum: module docstring of
        # gclab.coding.sums)
        return combine(sums, np.ones((1, len(sums))), size, outputs)

    def serves(self, round: int, jobs: int) -> bool:
        """A packet of ``round`` carries jobs ``round − T .. round`` (the accumulators)."""
        live = range(max(self.base, round - self.scheme.T), min(round + 1, jobs))
        return any(job not in self.decoded for job in live)

    def wanted(self, job: int) -> list[tuple[int, int]]:
        """Missing round-``job`` packets of the blocks that cannot decode ``job`` yet.

        Sufficient: with the earlier jobs known (the protocol recovers each job by its
        deadline), all of round ``job``'s packets decode it, as in classic GC. Packets of
        later rounds could help too, but the protocol pursues every packet named in
        parallel and counts each attempt, so naming them would inflate retransmissions
        several-fold (BENCHMARKS.md, "Numbers behind choices in the code") for a rarely
        earlier finish.
        """
        if job < self.base or job in self.decoded:
            return []
        col = job - (self.base - self.scheme.T)
        have = self.packets.get(job, {})
        return [
            (job, w)
            for block, solution in zip(self.scheme.blocks, self._solutions())
            if col not in solution.decodable
            for w in block
            if w not in have
        ]
