"""M-SGC, multiplexed sequential gradient coding (Krishnan et al., ICLR 2023).

Each round a worker runs ``W − 1 + B`` mini-tasks, slot ``m`` serving job ``r − m``
(``T = W − 2 + B``); a job's data is split into ``D1`` (uncoded, ``n(W−1)`` chunks,
worker ``w``'s chunk ``c`` in job-relative round ``c``) and ``D2`` (``B`` groups GC-coded
for ``λ`` stragglers, group ``j`` in job-relative round ``W − 1 + j``); in those rounds
a worker first redoes a failed D1 chunk. The model, the shared decoder and the
departures from the papers' code: :mod:`gclab.coding.sgc`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gclab.coding.classic import ClassicCR
from gclab.coding.contract import Decoder, Encoder, Part, Plan, Shape, StragglerModel, Task
from gclab.coding.sgc import AdaptiveDecoder, AdaptiveScheme, BurstyModel, GroupWeights, check_bwl
from gclab.coding.sums import combine, compile_sums
from gclab.errors import DecodeError


def m_sgc_load(n: int, B: int, W: int, lam: int) -> float:
    """M-SGC's load ``(λ+1)(W−1+B) / (n(B+(W−1)(λ+1)))``; ``(W−1+B)/(n(W−1))`` at ``λ = n``."""
    if lam == n:  # no D2 groups: everything is D1
        return (W - 1 + B) / (n * (W - 1))
    return (lam + 1) * (W - 1 + B) / (n * (B + (W - 1) * (lam + 1)))


class MSGCModel(BurstyModel):
    """:class:`BurstyModel`, and every round ``0 .. J+T−1`` runs, as in the papers' M-SGC.

    Their ``MultiplexedSGC.run`` charges all ``J + T`` rounds. For ``λ < n`` the last job
    needs every one of them anyway; at ``λ = n`` (no D2 groups) a round after the last
    job's D1 chunks only holds empty D2 mini-tasks, which the decodable rule skips.
    """

    def runs(self, round: int, jobs: int, decoder: Decoder) -> bool:
        return round < jobs + self.scheme.T


D1, D2, NONE = 0, 1, -1  # mini-task kinds: (D1, chunk), (D2, group), or nothing


class MSGC(AdaptiveScheme):
    """Multiplexed SGC: ``W − 1 + B`` mini-tasks of different jobs per worker per round.

    Parts: shard ``i``'s per-job samples are cut into the ``W − 1`` D1 chunks (worker
    ``i``'s) and the ``B`` D2 group pieces, consecutive fractions sharing boundaries;
    part ``i·P + c`` is piece ``c`` of shard ``i`` (``P`` pieces per shard). A packet is
    the ``T + 1`` slot results side by side (``packet_fraction = T + 1``).
    """

    name = "m_sgc"

    def __init__(self, n: int, B: int = 1, W: int = 2, lam: int = 2) -> None:
        self._check_workers(n)
        B, W, lam = check_bwl(n, B, W, lam)
        self.B, self.W, self.lam = B, W, lam
        self.n, self.s, self.T = n, lam, W - 2 + B
        self.groups = B if lam < n else 0  # λ = n: everything is D1 (x = 1)
        self.x = (lam + 1) * (W - 1) / (B + (lam + 1) * (W - 1)) if self.groups else 1.0
        bounds = [c * self.x / (W - 1) for c in range(W - 1)] + [self.x]
        if self.groups:
            bounds += [self.x + g * (1 - self.x) / B for g in range(1, B)] + [1.0]
        self.pieces = W - 1 + self.groups
        self.parts = tuple(
            Part(i, bounds[c], bounds[c + 1]) for i in range(n) for c in range(self.pieces)
        )
        # real: the D2 coefficients scale whole slots of a packet that also carries D1
        self.gc = ClassicCR(n, lam, construction="real") if self.groups else None
        holders = self.gc.placement if self.gc else tuple((w,) for w in range(n))
        self.placement = holders  # shards: D1 needs shard w, D2 shards w..w+λ

    @classmethod
    def search_grid(cls, n: int, recovery: str) -> list[dict[str, Any]]:
        """The SGC paper's M-SGC grid: ``1 <= B < W``, ``W − 1 + B <= 4`` (delay ``T <= 3``)."""
        pairs = [(B, W) for W in range(2, 5) for B in range(1, W) if W - 1 + B <= 4]
        return [{"B": B, "W": W, "lam": lam} for B, W in pairs for lam in range(1, n + 1)]

    @classmethod
    def shape(cls, n: int, B: int = 1, W: int = 2, lam: int = 2) -> Shape:
        """Without building the code: ``T = W − 2 + B``, a packet of ``T + 1`` slots."""
        T = W - 2 + B
        return Shape(
            m_sgc_load(n, B, W, lam), T, float(T + 1), f"{cls.name}(n={n}, B={B}, W={W}, lam={lam})"
        )

    def part(self, shard: int, piece: int) -> int:
        """Index of piece ``piece`` (D1 chunk ``c``, or D2 group ``W − 1 + j``) of ``shard``."""
        return shard * self.pieces + piece

    @property
    def load(self) -> float:
        return m_sgc_load(self.n, self.B, self.W, self.lam)

    @property
    def packet_fraction(self) -> float:
        return float(self.T + 1)

    def encoder(self, worker: int) -> Encoder:
        return MSGCEncoder(self, worker)

    def decoder(self, grad_size: int | None = None) -> Decoder:
        return MSGCDecoder(self, grad_size)

    def straggler_model(self) -> StragglerModel:
        return MSGCModel(self)


class MSGCEncoder(Encoder):
    """Slot ``round − job`` of the packet gets the mini-task's result (D2: GC-coded)."""

    def __init__(self, scheme: MSGC, worker: int) -> None:
        self.scheme = scheme
        self.row = scheme.gc.encoding[worker, :, 0] if scheme.gc else None

    def encode(self, round: int, partials: Mapping[Task, np.ndarray]) -> np.ndarray:
        if not partials:
            raise DecodeError(f"round {round}: worker has no partial gradients to encode.")
        first = next(iter(partials.values()))
        length = first.size
        packet = np.zeros((self.scheme.T + 1) * length, dtype=first.dtype)
        for task, grad in partials.items():
            slot = round - task.job
            shard, piece = divmod(task.part, self.scheme.pieces)
            out = packet[slot * length : (slot + 1) * length]
            if piece < self.scheme.W - 1:
                out += grad
            else:
                out += grad * grad.dtype.type(self.row[shard])
        return packet


class MSGCDecoder(AdaptiveDecoder):
    """Plan of round ``r``: arrays ``kind, index [T+1, n]``, mini-task of each slot and worker.

    State per job, also arrays: ``d1[job][c, w]`` and ``d2[job][g, w]`` hold the round a
    D1 chunk / D2 group result first arrived (``-1``: not yet; its slot is ``round − job``).
    Arrays rather than dicts because the simulator's parameter search runs over a
    thousand settings at n = 256: whole rounds are planned and recorded at once.
    """

    STATE = (*AdaptiveDecoder.STATE, "d1", "d2")

    def __init__(self, scheme: MSGC, grad_size: int | None) -> None:
        super().__init__(scheme, grad_size)
        self.scheme: MSGC = scheme
        self.d1: dict[int, np.ndarray] = {}  # job -> [W-1, n] round of first D1 result
        self.d2: dict[int, np.ndarray] = {}  # job -> [groups, n] round of first D2 result
        self.weights = GroupWeights(scheme.gc) if scheme.gc else None
        if not self.symbolic:  # the D2 code's numbers and the decode's kernel: now, not on a clock
            used = len(self.weights(tuple(range(scheme.n)))[0]) if self.weights else 0
            compile_sums(np.ones((1, scheme.n * (scheme.W - 1) + scheme.groups * used)))

    def _missing_d1(self, job: int) -> np.ndarray:
        """``[W-1, n]``: which D1 chunks of ``job`` have not arrived."""
        table = self.d1.get(job)
        shape = (self.scheme.W - 1, self.scheme.n)
        return np.ones(shape, dtype=bool) if table is None else table < 0

    def freeze(self, round: int) -> tuple[np.ndarray, np.ndarray]:
        scheme = self.scheme
        W, n = scheme.W, scheme.n
        kind = np.full((scheme.T + 1, n), NONE, dtype=np.int8)
        index = np.zeros((scheme.T + 1, n), dtype=np.int64)
        for slot in range(scheme.T + 1):
            job = round - slot
            if job < 0:
                continue
            if slot < W - 1:
                kind[slot], index[slot] = D1, slot
                continue
            group = slot - (W - 1)
            missing = self._missing_d1(job)
            retry = missing.any(axis=0) & self.undecoded(job)
            budget = scheme.lam if scheme.groups else n  # lowest ids first
            retry &= np.cumsum(retry) <= budget
            own = missing[group] if group < W - 1 else np.zeros(n, dtype=bool)
            chunk = np.where(own, group, missing.argmax(axis=0))
            kind[slot] = np.where(retry, D1, D2 if scheme.groups else NONE)
            index[slot] = np.where(retry, chunk, group)
        return kind, index

    def record(self, round: int, workers: np.ndarray) -> None:
        scheme = self.scheme
        kind, index = self.plans[round]
        for slot in range(scheme.T + 1):
            job = round - slot
            if not self.undecoded(job):
                continue
            for code, tables, rows in ((D1, self.d1, scheme.W - 1), (D2, self.d2, scheme.groups)):
                hit = workers[kind[slot, workers] == code]
                if hit.size:
                    table = tables.setdefault(job, np.full((rows, scheme.n), -1))
                    chunk = index[slot, hit]
                    fresh = table[chunk, hit] < 0  # the first result counts
                    table[chunk[fresh], hit[fresh]] = round

    def tasks(self, round: int, plan: tuple[np.ndarray, np.ndarray]) -> Plan:
        scheme = self.scheme
        kind, index = plan
        out = []
        for w in range(scheme.n):
            tasks = []
            for slot in range(scheme.T + 1):
                job, mini = round - slot, int(index[slot, w])
                if kind[slot, w] == D1:
                    tasks.append(Task(job, scheme.part(w, mini)))
                elif kind[slot, w] == D2:
                    piece = scheme.W - 1 + mini
                    tasks += [Task(job, scheme.part(i, piece)) for i in scheme.placement[w]]
            out.append(tuple(tasks))
        return tuple(out)

    def _short_groups(self, job: int) -> np.ndarray:
        """``[groups]``: D2 groups of ``job`` with fewer than ``n − λ`` results."""
        scheme = self.scheme
        table = self.d2.get(job)
        got = np.zeros(scheme.groups, dtype=int) if table is None else (table >= 0).sum(axis=1)
        return got < scheme.n - scheme.lam

    def _ready(self, job: int) -> bool:
        return (
            job in self.d1 and not self._missing_d1(job).any() and not self._short_groups(job).any()
        )

    def decodable(self) -> list[int]:
        return sorted(j for j in self.d1 if j not in self.decoded and self._ready(j))

    def decode(self, job: int) -> np.ndarray | None:
        if not self.undecoded(job) or not self._ready(job):
            raise DecodeError(f"job {job} is not decodable from the packets received so far.")
        d1, d2 = self.d1.pop(job), self.d2.pop(job, None)
        result = None
        if not self.symbolic:  # _ready() is exact: the simulator needs no weights
            pieces, weights = [], []
            for c, w in zip(*np.nonzero(d1 >= 0)):  # chunk by chunk, workers ascending
                pieces.append((int(d1[c, w]), int(w)))
                weights.append(1.0)
            for rounds in d2 if d2 is not None else ():
                used, coef = self.weights(tuple(np.flatnonzero(rounds >= 0).tolist()))
                pieces += [(int(rounds[w]), w) for w in used]
                weights += [float(c) for c in coef[0]]
            vectors = [self.slice(r, w, r - job) for r, w in pieces]
            result = combine(vectors, np.array([weights]), self.grad_size, self.outputs)
        self.finish(job)
        return result

    def serves(self, round: int, jobs: int) -> bool:
        kind = self.planned(round)[0]
        return any(
            0 <= round - slot < jobs and self.undecoded(round - slot) and (kind[slot] != NONE).any()
            for slot in range(self.scheme.T + 1)
        )

    def wanted(self, job: int) -> list[tuple[int, int]]:
        """Every undelivered attempt of a missing D1 chunk; the D2 groups short of n − λ
        (of the rounds that have begun)."""
        scheme = self.scheme
        if not self.undecoded(job):
            return []
        missing, short = self._missing_d1(job), self._short_groups(job)
        workers = np.arange(scheme.n)
        out = set()
        for slot in range(min(scheme.T, self.frozen - job) + 1):
            r = job + slot
            kind, index = (a[slot] for a in self.plans[r])
            need = (kind == D1) & missing[np.minimum(index, scheme.W - 2), workers]
            if scheme.groups:
                need |= (kind == D2) & short[np.minimum(index, scheme.groups - 1)]
            got = self.packets.get(r, {})
            out |= {(r, int(w)) for w in workers[need] if w not in got}
        return sorted(out)
