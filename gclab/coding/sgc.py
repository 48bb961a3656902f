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

Plans are dynamic: the plan of round ``r`` depends on what arrived before it begins.
The decoder fixes it in the round hook, :meth:`~gclab.coding.contract.Decoder.begin_round`,
which both engines call at the start of every round, so both see the same plans.

This module holds what the two schemes share: the model, its round-by-round check, the
decoder that keeps plans and packets, and cached GC weights; :mod:`gclab.coding.sr_sgc`
and :mod:`gclab.coding.m_sgc` hold the schemes.

Departures from the public simulator (docs/sequential.md, "sr_sgc and m_sgc"): decodability
needs ``≥ n − s`` (``≥ n − λ`` per D2 group), not ``> n − s``; and a model violation is not
hidden by "waiting for all" inside the scheme: erasures stay erasures. The round protocol
either recovers a due job that cannot decode by waiting for or retransmitting the packets
``wanted`` names (``network.recovery=decodable``), or applies the papers' rule with the
schemes' straggler models (``wait_all``: a round that breaks the model waits for every
packet). Two explicit policies make recovery always possible: SR-SGC picks its repeaters
among workers that never computed the job first (then lowest id), so a job always has
``n − s`` assigned workers; M-SGC lets at most ``λ`` workers redo D1 in a slot (lowest id first),
so every D2 group keeps ``n − λ`` assigned workers. Under the model neither policy binds
differently from the paper's (the tests check every admitted sequence on small n).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from gclab.coding import params
from gclab.coding.classic import ClassicCR
from gclab.coding.contract import Decoder, Plan, Scheme, StragglerModel
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


def check_bwl(n: int, B: object, W: object, lam: object) -> tuple[int, int, int]:
    """``(B, W, λ)`` as integers with ``1 <= B < W`` and ``0 <= λ <= n``."""
    B, W, lam = params.integer("B", B), params.integer("W", W), params.integer("lam", lam)
    params.require(B >= 1, f"B={B}", "B >= 1", f"W={W}", "B", range(1, 5))
    params.require(
        W > B, f"B={B}, W={W}", "1 <= B < W", f"B={B}", f"W for B={B}",
        range(B + 1, B + 5),
    )  # fmt: skip
    params.require(
        0 <= lam <= n, f"lam={lam}", "0 <= lam <= n", f"n={n}", f"lam for n={n}",
        range(n + 1),
    )  # fmt: skip
    return B, W, lam


class AdaptiveScheme(Scheme):
    """SGC schemes: plans fixed as each round begins, the (B, W, λ) model predicate."""

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
    """Fixes each round's plan when the round begins; keeps plans and packets.

    Subclasses implement :meth:`freeze` (the plan of a round from what arrived before it
    begins), :meth:`record` (what a delivered packet brings) and :meth:`tasks` (plan →
    tasks). Asking for anything of a round that has not begun raises: the engine calls
    :meth:`begin_round` first.
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

    def begin_round(self, round: int) -> None:
        """Fix the plan of ``round`` (and of any earlier round not begun) from what arrived."""
        while self.frozen < round:
            self.frozen += 1
            self.plans[self.frozen] = self.freeze(self.frozen)

    def planned(self, round: int) -> Any:
        """The plan of ``round``, which must have begun (:meth:`begin_round`)."""
        if round > self.frozen:
            raise RuntimeError(
                f"round {round} has not begun: the engine calls begin_round({round}) first."
            )
        return self.plans[round]

    def plan(self, round: int) -> Plan:
        return self.tasks(round, self.planned(round))

    def receive(self, round: int, worker: int, packet: np.ndarray | None) -> None:
        self.receive_many(round, [worker], [packet])

    def receive_many(
        self, round: int, workers: Sequence[int], packets: Sequence[np.ndarray | None]
    ) -> None:
        if round < self.base:
            return
        self.planned(round)
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
        """The plan of ``round`` from the packets delivered before it begins."""

    @abstractmethod
    def record(self, round: int, workers: np.ndarray) -> None:
        """Account the results carried by the newly delivered packets of ``workers``."""

    @abstractmethod
    def tasks(self, round: int, plan: tuple) -> Plan:
        """The plan of ``round`` as tasks per worker."""


class GroupWeights:
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
