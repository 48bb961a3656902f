"""Parameter search: simulate every setting of a scheme's grid and rank them by time.

As in the SGC papers (REFERENCE.md §6), a scheme's parameters are chosen by simulated
runtime on a delay trace. Grids are keyed by the scheme's ``name``; each maps the
number of workers ``n`` to the list of parameter overrides to try:

* ``uncoded``: nothing to choose;
* ``classic_cr``, ``ignore_stragglers``: every ``s`` in ``1..n−1``;
* ``classic_fr``: every ``s`` in ``1..n−1`` with ``(s+1) | n`` (FR needs it).

``sim.grid`` (a list of parameter dicts, e.g. ``'sim.grid=[{s:7},{s:15}]'``) searches a
chosen subset instead: building a scheme can cost more than simulating it (see
docs/simulator.md). A new scheme joins the search by adding its grid here (e.g.
SR-SGC's and M-SGC's ``(B, W, λ)`` per REFERENCE.md §6).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig

from gclab.errors import ConfigError
from gclab.network import DelayModel, NetworkConfig
from gclab.schemas import instantiate_checked
from gclab.sim.engine import SimResult, simulate

Params = dict[str, Any]


def _every_s(n: int) -> list[Params]:
    return [{"s": s} for s in range(1, n)]


def _fr_s(n: int) -> list[Params]:
    return [{"s": s} for s in range(1, n) if n % (s + 1) == 0]


def _sr_sgc(n: int) -> list[Params]:
    """The SGC paper's SR-SGC grid: ``B <= 4``, ``W = B+1, 2B+1``, every ``λ``.

    An SR-SGC run depends on ``(B, s)`` only (``s = ⌈Bλ/(W−1+B)⌉``; ``W`` and ``λ``
    enter just the model predicate), so one ``(W, λ)`` per ``(B, s)`` is kept.
    """
    seen, out = set(), []
    for B in range(1, 5):
        for W in (B + 1, 2 * B + 1):
            for lam in range(1, n + 1):
                key = (B, -(-B * lam // (W - 1 + B)))
                if key not in seen and key[1] < n:
                    seen.add(key)
                    out.append({"B": B, "W": W, "lam": lam})
    return out


def _m_sgc(n: int) -> list[Params]:
    """The SGC paper's M-SGC grid: ``1 <= B < W``, ``W − 1 + B <= 4`` (delay ``T <= 3``)."""
    pairs = [(B, W) for W in range(2, 5) for B in range(1, W) if W - 1 + B <= 4]
    return [{"B": B, "W": W, "lam": lam} for B, W in pairs for lam in range(1, n + 1)]


GRIDS: dict[str, Callable[[int], list[Params]]] = {
    "uncoded": lambda n: [{}],
    "classic_cr": _every_s,
    "classic_fr": _fr_s,
    "ignore_stragglers": _every_s,
    "sr_sgc": _sr_sgc,
    "m_sgc": _m_sgc,
}


@dataclass(frozen=True)
class Trial:
    """One grid point and how it ran."""

    params: Params
    result: SimResult

    def record(self) -> dict[str, object]:
        return {"params": self.params, **self.result.summary()}


def grid(scheme: DictConfig, n: int) -> list[Params]:
    """The parameter settings to try for the scheme configured by ``scheme``."""
    name = get_class(scheme._target_).name
    if name not in GRIDS:
        raise ConfigError(
            f"sim.search=true has no parameter grid for scheme {name!r}: "
            f"grids exist for {', '.join(sorted(GRIDS))}."
        )
    return GRIDS[name](n)


def search(
    scheme: DictConfig,
    n: int,
    delay: DelayModel,
    network: NetworkConfig,
    jobs: int,
    seed: int,
    unit_time: float = 0.0,
    settings: list[Params] | None = None,
) -> list[Trial]:
    """Simulate every setting (same seed, so the same delays); fastest first.

    ``settings`` (``sim.grid``) replaces the scheme's full grid by a chosen subset.
    """
    trials = [
        Trial(
            params,
            simulate(
                instantiate_checked(scheme, n=n, **params), delay, network, jobs, seed, unit_time
            ),
        )
        for params in (grid(scheme, n) if settings is None else settings)
    ]
    return sorted(trials, key=lambda t: t.result.total_time)
