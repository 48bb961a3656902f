"""Toy code across rounds (T > 0): uncoded, and a worker catches up on a part it missed.

Worker ``w`` holds shard ``w``. In round ``r`` it computes job ``r``'s part and, for each
job of the last ``T`` whose part from ``w`` had not arrived when round ``r`` began, that
part again; its packet holds one slot per job (slot ``r − job``). Job ``t`` decodes once
all ``n`` parts are in, so it is due by the end of round ``t + T`` when every worker gets
one packet through in rounds ``t .. t + T``. ``T = 0`` is ``uncoded``.
"""

from typing import Any

import numpy as np

from gclab.coding import params
from gclab.coding.contract import Decoder, Encoder, Part, Scheme, Task
from gclab.errors import DecodeError


class CatchUp(Scheme):
    name = "catch_up"

    def __init__(self, n: int, T: int = 1) -> None:
        self._check_workers(n)
        self.n, self.s, self.T = n, 0, params.delay(T)  # a ConfigError sentence if T < 0
        self.parts = tuple(Part(w) for w in range(n))
        self.placement = tuple((w,) for w in range(n))

    @property
    def load(self) -> float:
        return (self.T + 1) / self.n  # the most a worker computes: T parts to catch up on

    @property
    def packet_fraction(self) -> float:
        return float(self.T + 1)

    def tolerates(self, erasures: np.ndarray) -> bool:
        erased = np.asarray(erasures, dtype=bool).reshape(-1, self.n)[: self.T + 1]
        return not erased.all(axis=0).any()

    @classmethod
    def search_grid(cls, n: int, recovery: str) -> list[dict[str, Any]]:
        return [{"T": T} for T in range(3)]

    def encoder(self, worker: int) -> Encoder:
        return SlotEncoder(self.T)

    def decoder(self, grad_size: int | None = None) -> Decoder:
        return CatchUpDecoder(self, grad_size)


class SlotEncoder(Encoder):
    def __init__(self, T: int) -> None:
        self.T = T

    def encode(self, round: int, partials: dict[Task, np.ndarray]) -> np.ndarray:
        first = next(iter(partials.values()))
        packet = np.zeros((self.T + 1, first.size), dtype=first.dtype)
        for task, grad in partials.items():
            packet[round - task.job] = grad  # slot: how many rounds late the job is
        return packet.reshape(-1)


class CatchUpDecoder(Decoder):
    STATE = ("begun", "jobs", "parts", "done")

    def __init__(self, scheme: CatchUp, grad_size: int | None) -> None:
        super().__init__(scheme, grad_size)
        self.begun = -1  # the last round that began
        self.jobs: dict[int, tuple[tuple[int, ...], ...]] = {}  # round -> each worker's jobs
        self.parts: dict[int, dict[int, np.ndarray | None]] = {}  # job -> worker -> part
        self.done: set[int] = set()

    def begin_round(self, round: int) -> None:
        """The round hook: who catches up on what is fixed by what arrived before it."""
        while self.begun < round:
            self.begun += 1
            r, n = self.begun, self.scheme.n
            late = [j for j in range(max(0, r - self.scheme.T), r) if j not in self.done]
            self.jobs[r] = tuple(
                (r, *(j for j in late if w not in self.parts.get(j, {}))) for w in range(n)
            )

    def plan(self, round: int) -> tuple[tuple[Task, ...], ...]:
        return tuple(tuple(Task(j, w) for j in jobs) for w, jobs in enumerate(self.jobs[round]))

    def receive(self, round: int, worker: int, packet: np.ndarray | None) -> None:
        for job in self.jobs[round][worker]:
            slot = round - job
            part = None if self.symbolic else packet[slot * self.grad_size :][: self.grad_size]
            if job not in self.done:
                self.parts.setdefault(job, {}).setdefault(worker, part)

    def decodable(self) -> list[int]:
        return sorted(j for j, got in self.parts.items() if len(got) == self.scheme.n)

    def decode(self, job: int) -> np.ndarray | None:
        if job not in self.decodable():
            raise DecodeError(
                f"job {job} is not decodable: parts {sorted(self.parts.get(job, {}))}."
            )
        got = self.parts.pop(job)
        self.done.add(job)
        if self.symbolic:
            return None
        return np.sum([got[w] for w in range(self.scheme.n)], axis=0, dtype=np.float64)

    def wanted(self, job: int) -> list[tuple[int, int]]:
        have = self.parts.get(job, {})
        return [] if job in self.done else [(job, w) for w in range(self.scheme.n) if w not in have]

    def serves(self, round: int, jobs: int) -> bool:
        live = range(max(0, round - self.scheme.T), min(round + 1, jobs))
        return any(j not in self.done for j in live)
