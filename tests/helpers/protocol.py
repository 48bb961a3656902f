"""Hand-made delay models, schemes and clocks that drive the round protocol through exact
patterns."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from gclab.coding.contract import Decoder, Part, Plan, Scheme, Task
from gclab.coding.linear import LinearScheme
from gclab.network.base import DelayModel


class Scripted(DelayModel):
    """Delays and losses given per round; retransmission attempt losses per (round, worker)."""

    def __init__(
        self,
        delays: list[list[float]],
        lost: list[list[bool]] | None = None,
        relost: dict[tuple[int, int], list[bool]] | None = None,
    ) -> None:
        self._delays = np.asarray(delays, dtype=float)
        self._lost = np.zeros(self._delays.shape, bool) if lost is None else np.asarray(lost)
        self._relost = relost or {}

    def delays(self, round: int, n: int, seed: int, load: float) -> np.ndarray:
        return self._delays[round].copy()

    def lost(self, round: int, n: int, seed: int) -> np.ndarray:
        return self._lost[round].copy()

    def relost(self, round: int, packet_round: int, attempts: int, n: int, seed: int) -> np.ndarray:
        out = np.zeros((attempts, n), dtype=bool)
        for (r, w), pattern in self._relost.items():
            if r == round:
                k = min(attempts, len(pattern))
                out[:k, w] = pattern[:k]
        return out


class FractionalRepetition(LinearScheme):
    """FR with n=4, s=1 (groups {0, 1} and {2, 3}), local to the tests so they need no other
    scheme."""

    name = "test_fr"

    def __init__(self) -> None:
        block = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]])
        self._init_linear(4, 1, block)


def no_payload(round: int, worker: int) -> None:
    return None


class FakeTime:
    """Time that passes only when slept on: ``WallClock(fake.monotonic, fake.sleep)``."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Scheduled:
    """An arrival source whose worker ``w`` comes back ``compute[w]`` seconds after it is made.

    It waits with ``monotonic`` and ``sleep``: real time by default, or a :class:`FakeTime`.
    """

    def __init__(
        self,
        compute: list[float],
        failed: tuple[int, ...] = (),
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.monotonic, self.sleep = monotonic, sleep
        self.sent = monotonic()
        self.compute = np.asarray(compute, dtype=float)
        self.due = sorted((c, w) for w, c in enumerate(compute))
        self.failed = np.array(mask(*failed, n=len(compute)))

    def pending(self) -> bool:
        return bool(self.due)

    def wait(self, timeout: float | None) -> list[int]:
        until = self.sent + self.due[0][0]
        if timeout is not None:
            until = min(until, self.monotonic() + timeout)
        self.sleep(max(0.0, until - self.monotonic()))
        back = []
        while self.due and self.sent + self.due[0][0] <= self.monotonic():
            back.append(self.due.pop(0)[1])
        return back

    def seconds(self, workers: np.ndarray) -> np.ndarray:
        return self.compute[workers]


def mask(*workers: int, n: int = 4) -> list[bool]:
    return [w in workers for w in range(n)]


class LosesEverything(DelayModel):
    """Every transmission lost: the configs reject such models, the protocol still must not hang."""

    def lost(self, round: int, n: int, seed: int) -> np.ndarray:
        return np.ones(n, dtype=bool)

    def relost(self, round: int, packet_round: int, attempts: int, n: int, seed: int) -> np.ndarray:
        return np.ones((attempts, n), dtype=bool)


class OneRoundLate(Scheme):
    """T = 1: job t needs all n packets of round t and is due at the end of round t+1."""

    name = "test_late"

    def __init__(self, n: int) -> None:
        self.n, self.s, self.T = n, 0, 1
        self.parts = tuple(Part(j) for j in range(n))
        self.placement = tuple((w,) for w in range(n))

    @property
    def load(self) -> float:
        return 1 / self.n

    def tolerates(self, erasures: np.ndarray) -> bool:
        return not np.asarray(erasures)[0].any()

    def encoder(self, worker: int) -> None:
        raise NotImplementedError

    def decoder(self, grad_size: int | None = None) -> Decoder:
        return OneRoundLateDecoder(self, grad_size)


class OneRoundLateDecoder(Decoder):
    def __init__(self, scheme: OneRoundLate, grad_size: int | None) -> None:
        super().__init__(scheme, grad_size)
        self.got: dict[int, set[int]] = {}
        self.done: set[int] = set()
        self.received: list[tuple[int, int]] = []

    def plan(self, round: int) -> Plan:
        return tuple((Task(round, w),) for w in range(self.scheme.n))

    def receive(self, round: int, worker: int, packet: np.ndarray | None) -> None:
        self.received.append((round, worker))
        self.got.setdefault(round, set()).add(worker)

    def decodable(self) -> list[int]:
        return sorted(
            r for r, ws in self.got.items() if len(ws) == self.scheme.n and r not in self.done
        )

    def decode(self, job: int) -> None:
        self.done.add(job)

    def wanted(self, job: int) -> list[tuple[int, int]]:
        have = self.got.get(job, set())
        return [(job, w) for w in range(self.scheme.n) if w not in have]

    def serves(self, round: int, jobs: int) -> bool:
        return round < jobs and round not in self.done
