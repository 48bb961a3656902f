"""Fault injection: make chosen workers crash, stall or send NaN in chosen rounds.

For robustness studies and for the tests that prove gclab survives these faults. Each
entry is ``"round:worker"`` (``stall`` also takes ``":seconds"``); faults hit only the
first attempt of a round, never a recomputation the server asks for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gclab.errors import ConfigError


@dataclass
class FaultConfig:
    crash: list[str] = field(default_factory=list)  # "round:worker": the actor process exits
    stall: list[str] = field(default_factory=list)  # "round:worker:seconds": sleeps first
    nan: list[str] = field(default_factory=list)  # "round:worker": the packet is all NaN


@dataclass(frozen=True)
class Fault:
    kind: str
    seconds: float = 0.0


@dataclass(frozen=True)
class Faults:
    """Parsed fault plan, keyed by ``(round, worker)``."""

    plan: dict[tuple[int, int], Fault] = field(default_factory=dict)

    def at(self, round: int, worker: int) -> Fault | None:
        return self.plan.get((round, worker))

    @classmethod
    def parse(cls, config: FaultConfig, n: int) -> Faults:
        plan: dict[tuple[int, int], Fault] = {}
        for kind, fields in (("crash", 2), ("stall", 3), ("nan", 2)):
            for entry in getattr(config, kind):
                parts = str(entry).split(":")
                shape = "round:worker:seconds" if fields == 3 else "round:worker"
                try:
                    if len(parts) != fields:
                        raise ValueError
                    round, worker = int(parts[0]), int(parts[1])
                    seconds = float(parts[2]) if fields == 3 else 0.0
                except ValueError:
                    raise ConfigError(
                        f"faults.{kind} entry {entry!r} is invalid: write it as '{shape}'."
                    ) from None
                if round < 0 or not 0 <= worker < n or seconds < 0:
                    raise ConfigError(
                        f"faults.{kind} entry {entry!r} is invalid: round must be >= 0, worker "
                        f"in [0, {n}) and seconds >= 0."
                    )
                plan[round, worker] = Fault(kind, seconds)
        return cls(plan)
