"""Parameter search: simulate every setting of a scheme's grid and rank them by time.

As in the SGC papers (docs/simulator.md), a scheme's parameters are chosen by simulated
runtime on a delay trace. Each scheme class declares its grid
(:meth:`gclab.coding.contract.Scheme.search_grid`): the parameter overrides to try for ``n``
workers and a ``network.recovery``.

A full grid of ``uncoded``, ``classic_cr``, ``sr_sgc``, ``m_sgc``, ``is_cr`` or ``is_hr`` is
computed by the fast path (:mod:`gclab.sim.fast`) when it applies, with the same results
as simulating each setting alone. ``sim.grid`` (a list of parameter dicts, e.g.
``'sim.grid=[{s:7},{s:15}]'``) searches a chosen subset with the engine instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from gclab import CONF_DIR
from gclab.coding.contract import SCHEMES
from gclab.errors import ConfigError
from gclab.network import DelayModel, NetworkConfig
from gclab.schemas import instantiate_checked
from gclab.sim.engine import PAYLOAD_BYTES, SimResult, simulate
from gclab.sim.fast import fast_results

Params = dict[str, Any]


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


def scheme_options(names: Sequence[str], key: str = "sim.schemes") -> list[DictConfig]:
    """The configs of scheme options ``names`` as ``scheme=<name>`` composes each, defaults
    kept. Hydra composes them, all at once, from the running app's config search path
    (``hydra.searchpath`` included, so a scheme added there can be named) or, outside an
    app, from gclab's configs.

    ``key`` is the setting that named them: an unknown name's error names it, and each
    option sits at ``<key>.<name>``, the key its parameters' errors read.
    """
    searchpath = _searchpath()
    with _composing():
        loader = GlobalHydra.instance().config_loader()
        options = loader.get_group_options("scheme", config_name=None, overrides=searchpath)
        for name in names:
            if name not in options:
                raise ConfigError(
                    f"{key} has {name!r}, which is not a scheme option: the options are "
                    f"{', '.join(sorted(options))}."
                )
        # each under <key>.<name>, so that a parameter's error reads adapt.schemes.cce_fr.m=...
        picks = [f"+scheme@{key}.{name}={name}" for name in dict.fromkeys(names)]
        composed = compose(config_name=None, overrides=[*searchpath, *picks])
    return [OmegaConf.select(composed, f"{key}.{name}") for name in names]


def scheme_option(name: str, key: str = "sim.schemes") -> DictConfig:
    """The config of scheme option ``name`` (:func:`scheme_options`)."""
    return scheme_options([name], key)[0]


def _searchpath() -> list[str]:
    """The running app's ``hydra.searchpath`` as an override (none outside an app)."""
    if not HydraConfig.initialized() or not HydraConfig.get().searchpath:
        return []
    return [f"hydra.searchpath=[{','.join(repr(str(p)) for p in HydraConfig.get().searchpath)}]"]


@contextmanager
def _composing() -> Iterator[None]:
    """Hydra ready to compose: the running app's, else one on gclab's configs."""
    if GlobalHydra.instance().is_initialized():
        yield
        return
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        yield


def grid(scheme: DictConfig, n: int, recovery: str = "decodable") -> list[Params]:
    """The parameter settings to try for the scheme configured by ``scheme``."""
    cls = get_class(scheme._target_)
    settings = class_grid(cls, n, recovery)
    if settings is None:
        with_grids = [name for name, c in SCHEMES.items() if c.search_grid(n, recovery) is not None]
        raise ConfigError(
            f"sim.search=true has no parameter grid for scheme {cls.name!r}: "
            f"grids exist for {', '.join(sorted(with_grids))}."
        )
    return settings


def class_grid(cls: type, n: int, recovery: str) -> list[Params] | None:
    """``cls.search_grid(n, recovery)``, computed once per process (an adaptive run asks
    at every decision; the grids of the SGC schemes take milliseconds to build). The
    cache is keyed on the method itself, so a class whose ``search_grid`` is replaced
    asks the new one. Each call returns fresh dicts."""
    settings = _grid_of(cls.search_grid, n, str(recovery))
    return None if settings is None else [dict(items) for items in settings]


@lru_cache(maxsize=64)
def _grid_of(
    method: Callable[[int, str], list[Params] | None], n: int, recovery: str
) -> tuple[tuple[tuple[str, Any], ...], ...] | None:
    settings = method(n, recovery)
    return None if settings is None else tuple(tuple(params.items()) for params in settings)


def search(
    scheme: DictConfig,
    n: int,
    delay: DelayModel,
    network: NetworkConfig,
    jobs: int,
    seed: int,
    unit_time: float = 0.0,
    payload_bytes: float = PAYLOAD_BYTES,
    settings: list[Params] | None = None,
) -> list[Trial]:
    """Simulate every setting (same seed, so the same delays); fastest first.

    ``settings`` (``sim.grid``) replaces the scheme's full grid by a chosen subset.
    """
    name = scheme_name(scheme)
    chosen = grid(scheme, n, network.recovery) if settings is None else settings
    fast = None
    if settings is None:
        fast = fast_results(
            name, scheme, n, chosen, delay, network, jobs, seed, unit_time, payload_bytes
        )
    trials = []
    for i, params in enumerate(chosen):
        result = fast[i] if fast is not None else None
        if result is None:
            built = instantiate_checked(scheme, n=n, **params)
            result = simulate(built, delay, network, jobs, seed, unit_time, payload_bytes)
        trials.append(Trial(name, params, result))
    return sorted(trials, key=lambda t: t.result.total_time)
