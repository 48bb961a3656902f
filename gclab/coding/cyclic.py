"""Cyclic codes and their constructions: ``classic_cr`` (``m = 1``) and ``cce_cr``.

Worker ``w`` holds partitions ``w .. w+s+m-1`` (mod n) whatever the numbers are; the
numbers come from a *construction*, a strategy chosen by ``scheme.construction``. A
construction owns everything that differs between them: the encoding tensor, how
decoding weights are found, and whether "at least ``n - s`` packets" is exactly
decodability (then the simulator's symbolic decoder never builds the numbers).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from functools import cached_property, partial
from typing import ClassVar

import numpy as np

from gclab.coding.evaluation import NODE_FAMILIES, EvaluationCode, search_nodes
from gclab.coding.linear import LinearScheme
from gclab.errors import ConfigError


class Construction(ABC):
    """The numbers of one cyclic code: encoding ``E`` (``[n, n, m]``) and decoding weights."""

    #: The option's value (``scheme.construction=<name>``), for reports.
    name: str
    #: Whether "at least ``n - s`` packets" is exactly decodability for this construction.
    exact_predicate: ClassVar[bool]

    @property
    @abstractmethod
    def pairs(self) -> bool:
        """Whether ``E`` is complex, so payload floats are coded in pairs."""

    @property
    @abstractmethod
    def encoding(self) -> np.ndarray:
        """``E`` as ``[n, n, m]`` float64 or complex128 (built on first use)."""

    @abstractmethod
    def weights(self, survivors: tuple[int, ...]) -> np.ndarray | None:
        """Decoding weights ``C[m, len(survivors)]``, or ``None`` when they cannot decode."""


class NodeConstruction(Construction):
    """An evaluation-point code (:class:`gclab.coding.evaluation.EvaluationCode`).

    ``family`` (:data:`NODE_FAMILIES`) picks the nodes. Any ``n - s`` packets decode by
    closed-form weights and fewer never do, so the predicate is exact; the nodes need a
    conditioning search (up to a second at n = 256), so the code is built on first use.
    """

    exact_predicate = True

    def __init__(self, family: str, n: int, s: int, m: int) -> None:
        self.name = family
        self.n, self.s, self.m = n, s, m

    @property
    def pairs(self) -> bool:
        return self.name == "rotation"  # known without building the code

    @cached_property
    def code(self) -> EvaluationCode:
        nodes = search_nodes(self.name, self.n, self.s, self.m)
        return EvaluationCode(np.asarray(nodes), self.s, self.m)

    @property
    def encoding(self) -> np.ndarray:
        return self.code.encoding

    def weights(self, survivors: tuple[int, ...]) -> np.ndarray | None:
        return self.code.weights(survivors)


def node_constructions(n: int, s: int, m: int) -> dict[str, Callable[[], Construction]]:
    """The evaluation-point constructions for ``(n, s, m)``, by ``scheme.construction`` value."""
    return {family: partial(NodeConstruction, family, n, s, m) for family in NODE_FAMILIES}


def choose(
    scheme: str, construction: str, options: Mapping[str, Callable[[], Construction]]
) -> Construction:
    """The option ``construction`` of ``options`` (of ``scheme``), built; else a ConfigError."""
    if construction not in options:
        raise ConfigError(
            f"construction={construction!r} is not a {scheme} construction; "
            f"valid: {', '.join(options)}.",
            param="construction",
        )
    return options[construction]()


class CyclicScheme(LinearScheme):
    """A static cyclic code: the cyclic placement, numbers from :attr:`construction`."""

    construction: Construction

    def _init_cyclic(self, n: int, s: int, m: int, construction: Construction) -> None:
        self.construction = construction
        placement = tuple(tuple(sorted((w + i) % n for i in range(s + m))) for w in range(n))
        self._init_placement(n, s, placement, m)

    @property
    def exact_predicate(self) -> bool:  # type: ignore[override]
        return self.construction.exact_predicate

    @cached_property
    def encoding(self) -> np.ndarray:
        return self.construction.encoding

    @property
    def pairs(self) -> bool:
        return self.construction.pairs

    def decoding_weights(self, survivors: tuple[int, ...]) -> np.ndarray | None:
        return self.construction.weights(survivors)
