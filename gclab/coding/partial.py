"""Partial decoding of a static code (``network.recovery=partial``): the covered parts' sum.

When a job does not decode, :meth:`LinearScheme.partial_cover
<gclab.coding.linear.LinearScheme.partial_cover>` names the parts ``S`` whose gradient sum
the arrived packets ``F`` determine; the weights ``C`` solve ``C·E_F = 1_S`` (identity
blocks on the parts of ``S``, zero elsewhere) by least squares and pass the same float64
residual check as a full decode. The sum is rescaled by ``k / |S|`` so that, when every
part is equally likely to be covered (exchangeable erasures), its expectation given a
step is taken is the batch gradient (docs/design.md, "Partial recovery").
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from gclab.coding.contract import Part
from gclab.coding.numerics import RESIDUAL_TOL
from gclab.coding.sums import combine
from gclab.errors import DecodeError


class Covering(Protocol):
    """What partial decoding reads of a static code: a
    :class:`~gclab.coding.linear.LinearScheme`, which builds on this module (so it is
    described here, not imported)."""

    #: The encoding tensor ``E`` [n, k, m].
    encoding: np.ndarray
    #: The code's parts, one per shard.
    parts: tuple[Part, ...]

    def partial_cover(self, survivors: tuple[int, ...]) -> tuple[int, ...]: ...

    def describe(self) -> str: ...


def partial_sum(
    scheme: Covering, packets: dict[int, np.ndarray | None], grad_size: int | None
) -> tuple[np.ndarray | None, float]:
    """``(rescaled gradient sum, coverage)`` of the parts ``packets`` determine.

    ``packets`` maps the arrived workers to their packets; the gradient is ``None`` in
    symbolic mode (``grad_size=None``) and when no part is covered.
    """
    survivors = tuple(packets)
    parts = scheme.partial_cover(survivors)
    coverage = len(parts) / len(scheme.parts)
    if grad_size is None or not parts:
        return None, coverage
    used, weights = cover_weights(scheme, survivors, parts)
    scale = len(scheme.parts) / len(parts)
    return combine([packets[w] for w in used], weights * scale, grad_size), coverage


def cover_weights(
    scheme: Covering, survivors: tuple[int, ...], parts: tuple[int, ...]
) -> tuple[tuple[int, ...], np.ndarray]:
    """``(used workers, weights C[m, used])`` with ``C·E_F = 1_S`` for ``S = parts``.

    Raises :class:`DecodeError` when the residual exceeds ``RESIDUAL_TOL``: the scheme's
    cover named parts its packets do not determine.
    """
    e = scheme.encoding[list(survivors)]  # [F, k, m]
    m = e.shape[2]
    target = np.zeros((e.shape[1], m, m))
    target[list(parts)] = np.eye(m)
    a = e.transpose(1, 2, 0).reshape(-1, len(survivors))  # rows (j, u'), columns i
    weights = np.linalg.lstsq(a, target.reshape(-1, m).astype(a.dtype), rcond=None)[0].T
    error = float(np.max(np.abs(np.einsum("ui,ijv->juv", weights, e) - target.transpose(0, 2, 1))))
    if error > RESIDUAL_TOL:
        raise DecodeError(
            f"{scheme.describe()}: partial weights for parts {list(parts)} from workers "
            f"{sorted(survivors)} fail the residual check ({error:.2e} > {RESIDUAL_TOL:.0e})."
        )
    keep = np.flatnonzero(np.any(np.abs(weights) > 0, axis=0))
    return tuple(survivors[i] for i in keep), weights[:, keep]
