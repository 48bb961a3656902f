"""The typed Hydra schema of every config option, derived from the constructors.

A configurable class states its parameters and defaults once, in its constructor
signature. This module derives the schema of each option from it with hydra-zen
(``builds(cls, populate_full_signature=True)``) and stores it as ``schema/<group>/<option>``;
the option's YAML (``gclab/conf/<group>/<option>.yaml``) extends it through its defaults
list and holds only the ``_target_``, a comment and the values that differ from the
code's defaults (each marked ``# differs: <reason>``)::

    defaults:
      - /schema/<group>/<option>@_here_
      - _self_

Hydra then rejects unknown keys and values of the wrong type at compose time, and a
value outside a parameter's choices: a string choice is a ``StrEnum`` in the signature
(``placement: Strategy = Strategy.pack``), so the YAML and the command line spell it as
a plain string and OmegaConf checks it against the members' names.

Schemes are found by their registry (:data:`gclab.coding.contract.SCHEMES`): every scheme
class, built in or defined by a module outside gclab, gets ``schema/scheme/<name>`` the
moment its class is defined. Delay models are listed in :data:`DELAYS`; the training
app's torch and Ray groups are registered by :mod:`gclab.config`.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import UnionType
from typing import Any, Union, get_args, get_origin

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from hydra_zen import BuildsFn, ZenStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

import gclab.coding  # noqa: F401  (defines, and so registers, the built-in schemes)
from gclab.coding.contract import SCHEMES, Scheme
from gclab.coding.params import count
from gclab.errors import ConfigError, under
from gclab.network.base import DelayModel
from gclab.network.bernoulli import Bernoulli
from gclab.network.composite import Composite
from gclab.network.gilbert_elliott import GilbertElliott, TimedGilbertElliott
from gclab.network.straggler import Straggler
from gclab.network.tcp_loss import TcpLoss
from gclab.network.trace import Trace

#: Where the derived schemas go: Hydra's ConfigStore, as soon as they are added.
store = ZenStore(name="gclab", deferred_hydra_store=False)

#: ``delay`` options and the classes they build.
DELAYS: dict[str, type[DelayModel]] = {
    "none": DelayModel,
    "bernoulli": Bernoulli,
    "composite": Composite,
    "gilbert_elliott": GilbertElliott,
    "gilbert_elliott_time": TimedGilbertElliott,
    "straggler": Straggler,
    "tcp_loss": TcpLoss,
    "trace": Trace,
}


class _Builds(BuildsFn):
    """hydra-zen's ``builds`` that also types ``X | None`` and ``Sequence[X]`` for Hydra.

    hydra-zen 0.17 types a PEP 604 union and an abstract ``Sequence`` as ``Any``, which
    would let ``delay.p_bad_good=0`` through as the int 0 and ``logger.tags=abc`` as a
    string; as ``Optional[X]`` and ``list[X]`` they keep the compose-time type check.
    """

    @classmethod
    def _sanitized_type(cls, type_: Any, **kwargs: Any) -> Any:
        if isinstance(type_, UnionType):
            type_ = Union[type_.__args__]  # noqa: UP007  (the spelling hydra-zen reads)
        elif get_origin(type_) is Sequence:
            type_ = list[get_args(type_)[0]]
        return super()._sanitized_type(type_, **kwargs)


def schema(
    target: Any, exclude: tuple[str, ...] = (), *, base: type | None = None, **overrides: Any
) -> Any:
    """The structured config of ``target``'s full signature, less ``exclude``.

    A ``target`` that passes ``**kwargs`` on to its ``base`` class gets the base's
    parameters too (``cluster=netns`` extends ``Cluster``). ``overrides`` are config-only
    defaults (e.g. ``num_classes=None``: filled in by the app); the test of the config
    tree lists them.
    """
    bases = () if base is None else (schema(base),)
    return _Builds.builds(
        target, populate_full_signature=True, zen_exclude=exclude, builds_bases=bases, **overrides
    )


def register(
    group: str, option: str, target: Any, *exclude: str, base: type | None = None, **overrides: Any
) -> None:
    """Store the schema of ``target`` (see :func:`schema`) as ``schema/<group>/<option>``."""
    store(schema(target, exclude, base=base, **overrides), group=f"schema/{group}", name=option)


def register_scheme(cls: type[Scheme]) -> None:
    """``schema/scheme/<cls.name>``: ``n`` is left out, the app passes ``cluster.workers``."""
    register("scheme", cls.name, cls, "n")


for _option, _cls in DELAYS.items():
    register("delay", _option, _cls)
SCHEMES.subscribe(register_scheme)


def instantiate_checked(node: DictConfig, **kwargs: Any) -> Any:
    """``instantiate`` that surfaces our own ConfigError, named by the node's config key.

    A constructor's one-sentence ConfigError is what the user should read; Hydra wraps
    it in an InstantiationException with the whole call in the message. The constructor
    names its parameter (``p=2 is invalid ...``, :class:`ConfigError`'s ``param``); here
    it is qualified with the node's key, so the user reads the key they typed,
    ``delay.p=2``. Options nested in the node (a ``delay=composite``'s parts) are built
    first, one by one, each under its slot: a part's error reads ``delay.loss.p=2``. A
    node outside a config tree (its key is ``""``) leaves the parameter as it is. Any
    other failure is a bug, not bad input, and propagates as it is (with its traceback).
    """
    with under(node._get_full_key(None)):
        return _build(node, **kwargs)


def instantiate_scheme(cfg: DictConfig) -> Scheme:
    """The run's scheme (``cfg.scheme``) for its ``cluster.workers`` logical workers.

    A scheme's ``n`` is the one parameter set outside its node, so it is checked here, as
    the key the user typed, before the scheme is built: ``cluster.workers=0 is invalid``.
    """
    with under("cluster"):
        n = count("workers", cfg.cluster.workers)
    return instantiate_checked(cfg.scheme, n=n)


def _build(node: DictConfig, **kwargs: Any) -> Any:
    """:func:`instantiate_checked` below the node's own key."""
    try:
        parts = [k for k, v in node.items() if isinstance(v, DictConfig) and "_target_" in v]
        for slot in parts:
            if slot not in kwargs:
                with under(slot):
                    kwargs[slot] = _build(node[slot])
        if parts:  # the built parts replace their configs (a typed node takes no object)
            node = OmegaConf.masked_copy(node, [k for k in node if k not in parts])
        return instantiate(node, **kwargs)
    except InstantiationException as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ConfigError):
            cause = cause.__cause__
        if cause is None:
            raise
        raise cause from None
    except MissingMandatoryValue as exc:  # a ??? value, e.g. data=image_folder without root
        raise ConfigError(
            f"{exc.full_key} is missing: give it on the command line, e.g. {exc.full_key}=..."
        ) from None
