"""Shared helpers: enumerate scheme configurations and drive them through the contract."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

import numpy as np

from gclab.coding.cce import CCECR, CCEFR
from gclab.coding.classic import ClassicCR, ClassicFR, IgnoreStragglers
from gclab.coding.contract import SCHEMES, Task
from gclab.coding.is_cr import IsCR
from gclab.coding.is_hr import IsHR
from gclab.coding.linear import LinearScheme
from gclab.coding.uncoded import Uncoded

V = TypeVar("V")


def builtin_schemes() -> list[str]:
    """Names of the built-in schemes (classes defined in gclab), sorted.

    Scheme modules a test writes elsewhere (the toy scheme) register too; they are left out.
    """
    return sorted(name for name, cls in SCHEMES.items() if cls.__module__.startswith("gclab."))


def every_scheme(table: Mapping[str, V]) -> dict[str, V]:
    """``table`` (per-scheme settings, by name) in name order, if it names every built-in scheme.

    Fails at collection when a built-in scheme is missing, so a new scheme cannot be left
    out of a test that means "every scheme" without a decision in its table.
    """
    missing = [name for name in builtin_schemes() if name not in table]
    if missing:
        raise AssertionError(f"no entry for the built-in schemes {missing}: add them to the table.")
    return {name: table[name] for name in sorted(table)}


def schemes(n: int) -> Iterator[LinearScheme]:
    """Every valid built-in scheme configuration for ``n`` workers."""
    yield Uncoded(n)
    for s in range(n):
        yield IgnoreStragglers(n, s)
        yield ClassicCR(n, s)
        yield ClassicCR(n, s, construction="real")
        yield ClassicCR(n, s, construction="tandon", seed=1)
        if n % (s + 1) == 0:
            yield ClassicFR(n, s)
        for m in range(1, n - s + 1):
            yield CCECR(n, s, m)
            yield CCECR(n, s, m, construction="real")
            if n % (s + m) == 0:
                yield CCEFR(n, s, m)
    for c in range(1, n + 1):
        if n % c == 0:
            yield IsCR(n, c)
            # g = 1 and c1 = 0 are is_cr's windows; c1 = 1 mixes, c1 = c is FR-like
            for g in range(2, n // c + 1) if c > 1 else ():
                if n % (g * c) == 0:
                    yield from (IsHR(n, c, c1, g) for c1 in sorted({1, c}))


def partials(scheme: LinearScheme, length: int, seed: int = 0) -> np.ndarray:
    """One float64 partial gradient per part, ``[k, length]``."""
    return np.random.default_rng(seed).standard_normal((len(scheme.parts), length))


def packets(scheme: LinearScheme, grads: np.ndarray, round: int = 0) -> list[np.ndarray]:
    """Every worker's packet for ``round``, encoded from the tasks the plan gives it."""
    plan = scheme.decoder(grads.shape[1]).plan(round)
    out = []
    for w in range(scheme.n):
        assert all(task.job == round for task in plan[w])
        mine: dict[Task, np.ndarray] = {task: grads[task.part] for task in plan[w]}
        out.append(scheme.encoder(w).encode(round, mine))
    return out


def decode(
    scheme: LinearScheme,
    sent: Sequence[np.ndarray],
    arrivals: Sequence[int],
    grad_size: int,
    round: int = 0,
) -> np.ndarray | None:
    """Feed ``arrivals`` (in order) to a fresh decoder; the decoded sum or None."""
    decoder = scheme.decoder(grad_size)
    for w in arrivals:
        decoder.receive(round, w, sent[w])
    if round not in decoder.decodable():
        return None
    return decoder.decode(round)


def decodable_in_principle(scheme: LinearScheme, survivors: Sequence[int]) -> bool:
    """Ground truth, independent of the scheme's weights: is every stream sum in the span?"""
    if not survivors:
        return False
    e = scheme.encoding[list(survivors)]  # [F, k, m]
    system = e.transpose(1, 2, 0).reshape(-1, len(survivors))
    target = np.tile(np.eye(scheme.m), (e.shape[1], 1))
    solution = np.linalg.lstsq(system, target, rcond=None)[0]
    return bool(np.abs(system @ solution - target).max() < 1e-9)


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))
