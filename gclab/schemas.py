"""Dataclass schemas behind every config group, so typos and wrong types fail loudly.

Each configurable module declares the schema of its options next to the class it
builds and decorates it with :func:`register`; the YAML file of the option
(``gclab/conf/<group>/<option>.yaml``) extends it through its defaults list::

    defaults:
      - /schema/<group>/<option>@_here_
      - _self_

Hydra then rejects unknown keys and values of the wrong type at compose time.
"""

from __future__ import annotations

from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig
from omegaconf.errors import MissingMandatoryValue

from gclab.errors import ConfigError

T = TypeVar("T")


def register(group: str, option: str):
    """Class decorator: store a dataclass as the schema of ``<group>/<option>``."""

    def decorate(cls: type[T]) -> type[T]:
        ConfigStore.instance().store(group=f"schema/{group}", name=option, node=cls)
        return cls

    return decorate


def instantiate_checked(node: DictConfig, **kwargs: Any) -> Any:
    """``instantiate`` that surfaces our own ConfigError instead of Hydra's wrapper.

    A constructor's one-sentence ConfigError is what the user should read; Hydra wraps it
    in an InstantiationException with the whole call in the message. Any other failure
    is a bug, not bad input, and propagates as it is (with its traceback).
    """
    try:
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
