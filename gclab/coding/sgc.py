"""Sequential gradient coding for bursty stragglers (Krishnan et al., ICLR 2023; docs/design.md).

``(B, W, λ)`` bursty model: in every window of ``W`` consecutive rounds at most ``λ``
distinct workers straggle, and each worker's straggling rounds in the window fit in
``B`` consecutive rounds. :func:`bursty_model` is that predicate; both schemes'
``tolerates`` apply it to the job's window (the paper's guarantee needs it on every
window, which the tests check on whole admitted sequences).

* ``sr_sgc`` (selective repeat): GC(s) with ``s = ⌈Bλ/(W−1+B)⌉``, ``T = B``. A job
  missed by ``v > s`` workers in its round is redone by ``v − s`` of them ``B`` rounds
  later, instead of their new job; the job decodes from ``n − s`` distinct results.
* ``m_sgc`` (multiplexed): each round a worker runs ``W − 1 + B`` mini-tasks, slot ``m``
  serving job ``r − m`` (``T = W − 2 + B``); a job's data is split into ``D1`` (uncoded,
  ``n(W−1)`` chunks, worker ``w``'s chunk ``c`` in job-relative round ``c``) and ``D2``
  (``B`` groups GC-coded for ``λ`` stragglers, group ``j`` in job-relative round
  ``W − 1 + j``); in those rounds a worker first redoes a failed D1 chunk.

Plans are dynamic: the plan of round ``r`` depends on what arrived before it starts.
The decoder freezes it at the first event of round ``r`` (``plan(r)`` in the runtime;
in the simulator, which never calls ``plan``, the first ``receive``/``wanted`` of round
``≥ r``), before applying that event, so both engines see the same plans.

Departures from the public simulator (docs/sequential.md, "sr_sgc and m_sgc"): decodability
needs ``≥ n − s`` (``≥ n − λ`` per D2 group), not ``> n − s``; and a model violation is not
hidden by "waiting for all" inside the scheme: erasures stay erasures. The round protocol
either recovers a due job that cannot decode by waiting for or retransmitting the packets
``wanted`` names (``network.recovery=decodable``), or applies the papers' rule with the
schemes' straggler models below (``wait_all``: a round that breaks the model waits for every
packet). Two explicit policies make recovery always possible: SR-SGC picks its repeaters
among workers that never computed the job first (then lowest id), so a job always has
``n − s`` assigned workers; M-SGC lets at most ``λ`` workers redo D1 in a slot (lowest id first),
so every D2 group keeps ``n − λ`` assigned workers. Under the model neither policy binds
differently from the paper's (the tests check every admitted sequence on small n).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from math import ceil
from typing import Any

import numpy as np

from gclab.coding import params
from gclab.coding.base import (
    Decoder,
    Encoder,
    LinearEncoder,
    Part,
    Plan,
    Scheme,
    Shape,
    StragglerModel,
    Task,
    combine,
)
from gclab.coding.classic import ClassicCR
from gclab.errors import DecodeError


def bursty_model(erasures: np.ndarray, B: int, W: int, lam: int) -> bool:
    """Whether ``erasures`` (``[rounds, n]``) fits the ``(B, W, λ)`` bursty straggler model.

    Every window of ``W`` consecutive rounds (the whole array if shorter) has at most
    ``λ`` distinct stragglers, and each worker's straggling rounds in it span at most
    ``B`` rounds (equivalently: a worker straggling in round ``r`` did not straggle in
    rounds ``r−W+1..r−B``).
    """
    erased = np.asarray(erasures, dtype=bool)
    erased = erased.reshape(-1, erased.shape[-1])
    rounds = erased.shape[0]
    for start in range(max(1, rounds - W + 1)):
        window = erased[start : start + W]
        hit = window.any(axis=0)
        if int(hit.sum()) > lam:
            return False
        first = window.argmax(axis=0)
        last = window.shape[0] - 1 - window[::-1].argmax(axis=0)
        if np.any(hit & (last - first + 1 > B)):
            return False
    return True


class BurstyModel(StragglerModel):
    """The ``(B, W, λ)`` model round by round, as the SGC papers' simulator checks it.

    ``follows_straggler_model`` in their ``selective_repeat_sgc.py`` and
    ``multiplexed_sgc.py``: the round's stragglers together with the straggler marks of
    the ``W − 1`` rounds before it must fit :func:`bursty_model` (at most ``λ`` distinct
    stragglers in the window; a worker straggling now did not straggle in rounds
    ``r−W+1 .. r−B``). A round's marks are the erasures it was admitted with (none if
    the master waited for every packet), unless :meth:`exempt` leaves the round out.
    """

    def __init__(self, scheme: AdaptiveScheme) -> None:
        super().__init__(scheme)
        self.scheme: AdaptiveScheme = scheme
        self.marks: dict[int, np.ndarray] = {}

    def admits(self, round: int, erased: np.ndarray, decoder: Decoder) -> bool:
        scheme = self.scheme
        start = max(0, round + 1 - scheme.W)
        window = np.zeros((round + 1 - start, scheme.n), dtype=bool)
        for q in range(start, round):
            window[q - start] = self.marks.get(q, False)
        window[-1] = erased
        return bursty_model(window, scheme.B, scheme.W, scheme.lam)

    def settle(self, round: int, erased: np.ndarray, decoder: Decoder) -> None:
        if not self.exempt(round, erased, decoder):
            self.marks[round] = np.array(erased, dtype=bool)
        self.marks.pop(round + 1 - self.scheme.W, None)

    def exempt(self, round: int, erased: np.ndarray, decoder: Decoder) -> bool:
        """Whether ``round``'s stragglers are left out of the later checks (never, here)."""
        return False


class SRSGCModel(BurstyModel):
    """:class:`BurstyModel` with the exemption rule of the papers' SR-SGC.

    Their ``SelectiveRepeatSGC.stragglers(window, exemption=True)`` leaves out a round in
    which every worker that did not straggle computed the round's own job (nobody
    repeated an older one) and at most ``s`` workers straggled: such a round costs the
    code nothing beyond what GC(s) absorbs in the round itself.
    """

    def exempt(self, round: int, erased: np.ndarray, decoder: Decoder) -> bool:
        plan = np.asarray(decoder.plans[round])
        return bool(np.all(erased | (plan == round))) and int(erased.sum()) <= self.scheme.s


class MSGCModel(BurstyModel):
    """:class:`BurstyModel`, and every round ``0 .. J+T−1`` runs, as in the papers' M-SGC.

    Their ``MultiplexedSGC.run`` charges all ``J + T`` rounds. For ``λ < n`` the last job
    needs every one of them anyway; at ``λ = n`` (no D2 groups) a round after the last
    job's D1 chunks only holds empty D2 mini-tasks, which the decodable rule skips.
    """

    def runs(self, round: int, jobs: int, decoder: Decoder) -> bool:
        return round < jobs + self.scheme.T


def sr_sgc_stragglers(B: int, W: int, lam: int) -> int:
    """SR-SGC's GC parameter ``s = ⌈Bλ/(W−1+B)⌉``."""
    return ceil(B * lam / (W - 1 + B))


def m_sgc_load(n: int, B: int, W: int, lam: int) -> float:
    """M-SGC's load ``(λ+1)(W−1+B) / (n(B+(W−1)(λ+1)))``; ``(W−1+B)/(n(W−1))`` at ``λ = n``."""
    if lam == n:  # no D2 groups: everything is D1
        return (W - 1 + B) / (n * (W - 1))
    return (lam + 1) * (W - 1 + B) / (n * (B + (W - 1) * (lam + 1)))


def _check_bwl(n: int, B: object, W: object, lam: object) -> tuple[int, int, int]:
    """``(B, W, λ)`` as integers with ``1 <= B < W`` and ``0 <= λ <= n``."""
    B, W, lam = params.integer("B", B), params.integer("W", W), params.integer("lam", lam)
    params.require(B >= 1, f"scheme.B={B}", "B >= 1", f"W={W}", "B", range(1, 5))
    params.require(
        W > B, f"scheme.B={B}, scheme.W={W}", "1 <= B < W", f"B={B}", f"W for B={B}",
        range(B + 1, B + 5),
    )  # fmt: skip
    params.require(
        0 <= lam <= n, f"scheme.lam={lam}", "0 <= lam <= n", f"n={n}", f"lam for n={n}",
        range(n + 1),
    )  # fmt: skip
    return B, W, lam


class AdaptiveScheme(Scheme):
    """SGC schemes: dynamic plans frozen per round, (B, W, λ) model predicate."""

    B: int
    W: int
    lam: int

    def tolerates(self, erasures: np.ndarray) -> bool:
        return bursty_model(erasures, self.B, self.W, self.lam)

    def straggler_model(self) -> StragglerModel:
        return BurstyModel(self)

    def describe(self) -> str:
        return f"{self.name}(n={self.n}, B={self.B}, W={self.W}, lam={self.lam})"


class AdaptiveDecoder(Decoder):
    """Freezes each round's plan at the round's first event; keeps plans and packets.

    Subclasses implement :meth:`freeze` (the plan of a round from what arrived so far),
    :meth:`record` (what a delivered packet brings) and :meth:`tasks` (plan → tasks).
    """

    STATE = ("frozen", "plans", "packets", "decoded", "base")

    def __init__(self, scheme: AdaptiveScheme, grad_size: int | None) -> None:
        super().__init__(scheme, grad_size)
        self.scheme: AdaptiveScheme = scheme
        self.frozen = -1  # plans of rounds <= frozen are fixed
        self.plans: dict[int, tuple] = {}
        self.packets: dict[int, dict[int, np.ndarray | None]] = {}  # round -> worker -> packet
        self.decoded: set[int] = set()
        self.base = 0  # oldest undecoded job

    def advance(self, round: int) -> None:
        """Freeze the plans of every round up to ``round`` (rounds start in order)."""
        while self.frozen < round:
            self.frozen += 1
            self.plans[self.frozen] = self.freeze(self.frozen)

    def plan(self, round: int) -> Plan:
        self.advance(round)
        return self.tasks(round, self.plans[round])

    def receive(self, round: int, worker: int, packet: np.ndarray | None) -> None:
        self.receive_many(round, [worker], [packet])

    def receive_many(
        self, round: int, workers: Sequence[int], packets: Sequence[np.ndarray | None]
    ) -> None:
        self.advance(round)
        if round < self.base:
            return
        got = self.packets.setdefault(round, {})
        new = []
        for worker, packet in zip(workers, packets):
            if worker not in got:  # the first copy of a packet counts, as in receive
                got[worker] = packet
                new.append(worker)
        if new:
            self.record(round, np.array(new))

    def undecoded(self, job: int) -> bool:
        """Whether ``job`` (``>= 0``) is not decoded yet."""
        return job >= self.base and job not in self.decoded

    def finish(self, job: int) -> None:
        """Mark ``job`` decoded and drop the rounds whose jobs are all decoded."""
        self.decoded.add(job)
        while self.base in self.decoded:
            self.decoded.discard(self.base)
            self.base += 1
        for r in [r for r in self.packets if r < self.base]:
            del self.packets[r]
        for r in [r for r in self.plans if r < self.base - self.scheme.T]:
            del self.plans[r]

    def slice(self, round: int, worker: int, slot: int) -> np.ndarray:
        """Slot ``slot`` (one gradient long) of a delivered packet."""
        length = self.grad_size
        return self.packets[round][worker][slot * length : (slot + 1) * length]

    @abstractmethod
    def freeze(self, round: int) -> tuple:
        """The plan of ``round`` from the packets delivered so far."""

    @abstractmethod
    def record(self, round: int, workers: np.ndarray) -> None:
        """Account the results carried by the newly delivered packets of ``workers``."""

    @abstractmethod
    def tasks(self, round: int, plan: tuple) -> Plan:
        """The frozen plan of ``round`` as tasks per worker."""


class _GroupWeights:
    """GC decoding weights per survivor set of a cyclic code, cached (residual-checked)."""

    def __init__(self, code: ClassicCR) -> None:
        self.code = code
        self.cache: dict[tuple[int, ...], tuple[tuple[int, ...], np.ndarray]] = {}

    def __call__(self, workers: tuple[int, ...]) -> tuple[tuple[int, ...], np.ndarray]:
        key = tuple(sorted(workers))
        if key not in self.cache:
            solution = self.code.checked_weights(key)
            if solution is None:
                raise DecodeError(f"{self.code.describe()}: workers {key} cannot decode.")
            self.cache[key] = solution
        return self.cache[key]


# ---------------------------------------------------------------------------------------
# SR-SGC
# ---------------------------------------------------------------------------------------


class SRSGC(AdaptiveScheme):
    """Selective-repeat SGC: GC(s) per job, ``v − s`` repeats ``B`` rounds later."""

    name = "sr_sgc"

    def __init__(self, n: int, B: int = 1, W: int = 2, lam: int = 2) -> None:
        self._check_workers(n)
        B, W, lam = _check_bwl(n, B, W, lam)
        valid_w = [B * i + 1 for i in range(1, 5)]
        params.require(
            (W - 1) % B == 0, f"scheme.B={B}, scheme.W={W}", "B | (W-1)", f"W-1={W - 1}",
            f"W for B={B}", valid_w,
        )  # fmt: skip
        self.B, self.W, self.lam = B, W, lam
        self.n, self.s, self.T = n, sr_sgc_stragglers(B, W, lam), B
        self.gc = ClassicCR(n, self.s)
        self.parts, self.placement = self.gc.parts, self.gc.placement

    @property
    def load(self) -> float:
        return (self.s + 1) / self.n

    @classmethod
    def shape(cls, n: int, B: int = 1, W: int = 2, lam: int = 2) -> Shape:
        """Without building the code: GC(s) per job, ``T = B``."""
        s = sr_sgc_stragglers(B, W, lam)
        return Shape((s + 1) / n, B, 1.0, f"{cls.name}(n={n}, B={B}, W={W}, lam={lam}, s={s})")

    @classmethod
    def search_grid(cls, n: int, recovery: str) -> list[dict[str, Any]]:
        """The SGC paper's SR-SGC grid: ``B <= 4``, ``W ∈ {B+1, 2B+1, …} <= 5``, every ``λ``.

        With ``recovery=decodable`` a run depends on ``(B, s)`` only (``s = ⌈Bλ/(W−1+B)⌉``;
        ``W`` and ``λ`` enter just the straggler model), so one setting per ``(B, s)`` is
        kept; with ``wait_all`` the model decides rounds and every setting counts.
        """
        seen, out = set(), []
        for B in range(1, 5):
            for W in range(B + 1, 6, B):
                for lam in range(1, n + 1):
                    s = sr_sgc_stragglers(B, W, lam)
                    key = (B, s) if recovery == "decodable" else (B, W, lam)
                    if key not in seen and s < n:
                        seen.add(key)
                        out.append({"B": B, "W": W, "lam": lam})
        return out

    def encoder(self, worker: int) -> Encoder:
        return LinearEncoder(self.gc, worker)  # one job per round: a classic packet

    def decoder(self, grad_size: int | None = None) -> Decoder:
        return SRSGCDecoder(self, grad_size)

    def straggler_model(self) -> StragglerModel:
        return SRSGCModel(self)

    def describe(self) -> str:
        return f"{self.name}(n={self.n}, B={self.B}, W={self.W}, lam={self.lam}, s={self.s})"


class SRSGCDecoder(AdaptiveDecoder):
    """Plan of round ``r``: each worker's job (``r``, or ``r − B`` for the repeaters)."""

    STATE = (*AdaptiveDecoder.STATE, "results")

    def __init__(self, scheme: SRSGC, grad_size: int | None) -> None:
        super().__init__(scheme, grad_size)
        self.scheme: SRSGC = scheme
        self.results: dict[int, dict[int, int]] = {}  # job -> worker -> round of its result
        self.weights = _GroupWeights(scheme.gc)

    def freeze(self, round: int) -> tuple[int, ...]:
        scheme = self.scheme
        jobs = [round] * scheme.n
        job = round - scheme.B
        if self.undecoded(job):
            computed = self.plans[job]
            have = self.results.get(job, {})
            idle = [w for w in range(scheme.n) if computed[w] != job]  # never computed it
            lost = [w for w in range(scheme.n) if computed[w] == job and w not in have]
            missing = len(idle) + len(lost)
            for w in (idle + lost)[: max(0, missing - scheme.s)]:
                jobs[w] = job
        return tuple(jobs)

    def record(self, round: int, workers: np.ndarray) -> None:
        plan = self.plans[round]
        for worker in workers.tolist():
            job = plan[worker]
            if self.undecoded(job):
                self.results.setdefault(job, {}).setdefault(worker, round)

    def tasks(self, round: int, plan: tuple) -> Plan:
        placement = self.scheme.placement
        return tuple(tuple(Task(plan[w], j) for j in placement[w]) for w in range(len(plan)))

    def decodable(self) -> list[int]:
        need = self.scheme.n - self.scheme.s
        return sorted(
            j for j, got in self.results.items() if len(got) >= need and j not in self.decoded
        )

    def decode(self, job: int) -> np.ndarray | None:
        if job not in self.decodable():
            raise DecodeError(f"job {job} is not decodable from the packets received so far.")
        got = self.results.pop(job)
        result = None
        if not self.symbolic:  # decodable() is exact: the simulator needs no weights
            used, weights = self.weights(tuple(got))
            packets = [self.packets[got[w]][w] for w in used]
            result = combine(packets, weights, self.grad_size, self.outputs)
        self.finish(job)
        return result

    def serves(self, round: int, jobs: int) -> bool:
        self.advance(round)
        return any(job < jobs and self.undecoded(job) for job in set(self.plans[round]))

    def wanted(self, job: int) -> list[tuple[int, int]]:
        """Undelivered job-``job`` packets: its own round, then the repeats ``B`` later."""
        self.advance(job + self.scheme.T)
        if not self.undecoded(job):
            return []
        have = self.results.get(job, {})
        out = []
        for r in (job, job + self.scheme.B):
            out += [
                (r, w)
                for w in range(self.scheme.n)
                if self.plans[r][w] == job and w not in have and w not in self.packets.get(r, {})
            ]
        return out


# ---------------------------------------------------------------------------------------
# M-SGC
# ---------------------------------------------------------------------------------------


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
        B, W, lam = _check_bwl(n, B, W, lam)
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
        self.weights = _GroupWeights(scheme.gc) if scheme.gc else None

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
        self.advance(round)
        kind = self.plans[round][0]
        return any(
            0 <= round - slot < jobs and self.undecoded(round - slot) and (kind[slot] != NONE).any()
            for slot in range(self.scheme.T + 1)
        )

    def wanted(self, job: int) -> list[tuple[int, int]]:
        """Every undelivered attempt of a missing D1 chunk; the D2 groups short of n − λ."""
        scheme = self.scheme
        self.advance(job + scheme.T)
        if not self.undecoded(job):
            return []
        missing, short = self._missing_d1(job), self._short_groups(job)
        workers = np.arange(scheme.n)
        out = set()
        for slot in range(scheme.T + 1):
            r = job + slot
            kind, index = (a[slot] for a in self.plans[r])
            need = (kind == D1) & missing[np.minimum(index, scheme.W - 2), workers]
            if scheme.groups:
                need |= (kind == D2) & short[np.minimum(index, scheme.groups - 1)]
            got = self.packets.get(r, {})
            out |= {(r, int(w)) for w in workers[need] if w not in got}
        return sorted(out)
