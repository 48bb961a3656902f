"""Hand-made delay models and schemes that drive the round protocol through exact patterns."""

from __future__ import annotations

import numpy as np

from gclab.coding.base import Decoder, LinearScheme, Part, Plan, Scheme, Task
from gclab.network import NetworkConfig, RoundOutcome, RoundProtocol
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
    """FR with n=4, s=1 (docs/design.md, test vector 1), local to the tests so that they
    need no other scheme."""

    name = "test_fr"

    def __init__(self) -> None:
        block = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]])
        self._init_linear(4, 1, block)


def no_payload(round: int, worker: int) -> None:
    return None


def run(
    scheme: Scheme, model: DelayModel, rounds: int = 1, compute: float = 0.0, **network: object
) -> tuple[RoundProtocol, list[RoundOutcome]]:
    protocol = RoundProtocol(NetworkConfig(**network), model, scheme.n, seed=0)
    decoder = scheme.decoder()
    outcomes = []
    for r in range(rounds):
        out = protocol.run_round(r, np.full(scheme.n, compute), decoder, no_payload)
        for job in out.decodable:
            decoder.decode(job)
        outcomes.append(out)
    return protocol, outcomes


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
