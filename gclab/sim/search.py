"""Parameter search: simulate every setting of a scheme's grid and rank them by time.

As in the SGC papers (REFERENCE.md §6), a scheme's parameters are chosen by simulated
runtime on a delay trace. Grids are keyed by the scheme's ``name``; each maps the
number of workers ``n`` and ``network.recovery`` to the parameter overrides to try:

* ``uncoded``: nothing to choose;
* ``classic_cr``, ``ignore_stragglers``: every ``s`` in ``1..n−1``;
* ``classic_fr``: every ``s`` in ``1..n−1`` with ``(s+1) | n`` (FR needs it);
* ``sr_sgc``: ``B <= 4``, ``W ∈ {B+1, 2B+1, …} <= 5``, every ``λ`` (one per ``(B, s)``
  with ``recovery=decodable``, where runs depend on nothing else);
* ``m_sgc``: ``1 <= B < W``, ``W − 1 + B <= 4``, every ``λ``.

A full grid of ``uncoded``, ``classic_cr``, ``sr_sgc`` or ``m_sgc`` is computed by the
fast path (:mod:`gclab.sim.fast`) when it applies, with the same results as simulating
each setting alone. ``sim.grid`` (a list of parameter dicts, e.g.
``'sim.grid=[{s:7},{s:15}]'``) searches a chosen subset with the engine instead. A new
scheme joins the search by adding its grid here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from gclab import CONF_DIR
from gclab.coding.sgc import sr_sgc_stragglers
from gclab.errors import ConfigError
from gclab.network import DelayModel, NetworkConfig
from gclab.schemas import instantiate_checked
from gclab.sim.engine import SimResult, simulate
from gclab.sim.fast import fast_results

Params = dict[str, Any]


def _every_s(n: int, recovery: str) -> list[Params]:
    return [{"s": s} for s in range(1, n)]


def _fr_s(n: int, recovery: str) -> list[Params]:
    return [{"s": s} for s in range(1, n) if n % (s + 1) == 0]


def _sr_sgc(n: int, recovery: str) -> list[Params]:
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


def _m_sgc(n: int, recovery: str) -> list[Params]:
    """The SGC paper's M-SGC grid: ``1 <= B < W``, ``W − 1 + B <= 4`` (delay ``T <= 3``)."""
    pairs = [(B, W) for W in range(2, 5) for B in range(1, W) if W - 1 + B <= 4]
    return [{"B": B, "W": W, "lam": lam} for B, W in pairs for lam in range(1, n + 1)]


GRIDS: dict[str, Callable[[int, str], list[Params]]] = {
    "uncoded": lambda n, recovery: [{}],
    "classic_cr": _every_s,
    "classic_fr": _fr_s,
    "ignore_stragglers": _every_s,
    "sr_sgc": _sr_sgc,
    "m_sgc": _m_sgc,
}


@dataclass(frozen=True)
class Trial:
    """One grid point of scheme ``name`` and how it ran."""

    name: str
    params: Params
    result: SimResult

    def record(self) -> dict[str, object]:
        return {"params": self.params, **self.result.summary()}


def scheme_name(scheme: DictConfig) -> str:
    """The ``name`` of the scheme class a config node builds."""
    return get_class(scheme._target_).name


def scheme_option(name: str) -> DictConfig:
    """The config of scheme option ``name`` as ``scheme=<name>`` composes it, defaults kept."""
    path = CONF_DIR / "scheme" / f"{name}.yaml"
    if not path.is_file():
        options = ", ".join(sorted(p.stem for p in (CONF_DIR / "scheme").glob("*.yaml")))
        raise ConfigError(
            f"sim.schemes has {name!r}, which is not a scheme option: the options are {options}."
        )
    node = OmegaConf.load(path)
    node.pop("defaults", None)
    return node


def grid(scheme: DictConfig, n: int, recovery: str = "decodable") -> list[Params]:
    """The parameter settings to try for the scheme configured by ``scheme``."""
    name = scheme_name(scheme)
    if name not in GRIDS:
        raise ConfigError(
            f"sim.search=true has no parameter grid for scheme {name!r}: "
            f"grids exist for {', '.join(sorted(GRIDS))}."
        )
    return GRIDS[name](n, recovery)


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
    name = scheme_name(scheme)
    chosen = grid(scheme, n, network.recovery) if settings is None else settings
    fast = None
    if settings is None:
        fast = fast_results(name, scheme, n, chosen, delay, network, jobs, seed, unit_time)
    trials = []
    for i, params in enumerate(chosen):
        result = fast[i] if fast is not None else None
        if result is None:
            built = instantiate_checked(scheme, n=n, **params)
            result = simulate(built, delay, network, jobs, seed, unit_time)
        trials.append(Trial(name, params, result))
    return sorted(trials, key=lambda t: t.result.total_time)
