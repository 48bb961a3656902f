"""Dataclass schemas behind every config group, so typos and wrong types fail loudly.

Each configurable module declares the schema of its options next to the class it
builds and decorates it with :func:`register`; the YAML file of the option
(``conf/<group>/<option>.yaml``) extends it through its defaults list::

    defaults:
      - /schema/<group>/<option>@_here_
      - _self_

Hydra then rejects unknown keys and values of the wrong type at compose time.
"""

from __future__ import annotations

from typing import TypeVar

from hydra.core.config_store import ConfigStore

T = TypeVar("T")


def register(group: str, option: str):
    """Class decorator: store a dataclass as the schema of ``<group>/<option>``."""

    def decorate(cls: type[T]) -> type[T]:
        ConfigStore.instance().store(group=f"schema/{group}", name=option, node=cls)
        return cls

    return decorate
