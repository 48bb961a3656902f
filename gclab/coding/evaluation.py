"""Evaluation-point gradient codes: Ye–Abbe CCE-GC, and cyclic GC as its m = 1 case.

The math: docs/design.md, "Evaluation-point codes and CCE". Worker ``w`` holds partitions
``w .. w+d-1`` (mod n), ``d = s + m``, and sends ``f_w = P(θ_w)`` where
``P = Σ_j Σ_u g_j^(u) p_j^(u)`` and ``p_j^(u)`` vanishes on the ``n - d`` nodes of the
workers that lack ``j``. The top ``m`` coefficients of ``P`` (degree ``< K = n - s``) are
the ``m`` stream sums, so any ``K`` packets decode them by closed-form Lagrange weights;
fewer than ``K`` never do (a degree ``K-1`` polynomial vanishing on ``< K`` nodes can have
any leading coefficient), which makes ``|F| >= K`` an exact decodability predicate.

Numerics (the rules of the same section). Nothing is expanded to monomials and nothing is solved:
with ``Φ_w = Π_{v≠w} (θ_w - θ_v)`` the huge common factor of row ``w`` cancels against the
decoding weight of ``w``, leaving

* encoding  ``E[w, j, u] = q_{j,u}(θ_w) / Π_{r ∈ H_j∖w} (θ_w - θ_r)``  (``s + m - 1`` factors),
* decoding  ``C[u, w] = (-1)^ν e_ν(θ_{F∖w}) · Π_{v ∉ F} (θ_w - θ_v)``  (``s`` factors),

with ``H_j`` the holders of ``j``, ``ν = m - u``, ``q_{j,u}(x) = Σ_{ν<u} h_ν(θ_{R_j}) x^{u-1-ν}``
and ``h``/``e`` the complete/elementary symmetric polynomials, all evaluated as short
power series. Rows are then scaled to max-abs 1 (weights scaled inversely), so float32
packets use their full mantissa. The conditioning depends only on local ratios of node
distances, which :func:`search_nodes` keeps small by choosing which node each worker gets.
"""

from __future__ import annotations

from functools import cache
from math import gcd

import numpy as np


def holders(n: int, d: int) -> np.ndarray:
    """``[n, d]`` array: row ``j`` lists the workers ``j, j-1, .., j-d+1`` (mod n) holding ``j``."""
    return (np.arange(n)[:, None] - np.arange(d)[None, :]) % n


def _mul_series(
    base: np.ndarray, roots: np.ndarray, *, sign: float, inverse: bool = False
) -> np.ndarray:
    """Truncated power series ``base · Π_r (1 + sign·r·y)^(±1)``, row by row.

    ``base`` is ``[rows, order]`` (broadcastable), ``roots`` ``[rows, count]``. From 1 this
    gives elementary symmetric polynomials (``sign = +1``) or, inverted with ``sign = -1``,
    complete homogeneous ones: the generating functions of the closed forms (module
    docstring), evaluated only to the ``m`` orders needed, where monomial expansions of
    the full products would blow up.
    """
    dtype = np.result_type(base, roots, np.float64)  # complex nodes give complex series
    out = np.array(np.broadcast_to(base, (roots.shape[0], base.shape[-1])), dtype=dtype)
    order = out.shape[1]
    for r in roots.T:
        f = sign * r
        if inverse:  # multiply by 1 / (1 + f·y) = Σ (-f·y)^k: ascending recurrence
            for k in range(1, order):
                out[:, k] -= f * out[:, k - 1]
        else:  # multiply by (1 + f·y): descending, so out[k-1] is still the old value
            for k in range(order - 1, 0, -1):
                out[:, k] += f * out[:, k - 1]
    return out


def _unit(m: int) -> np.ndarray:
    """The power series 1, truncated to ``m`` orders, as one row."""
    return np.eye(1, m)


def complete_symmetric(roots: np.ndarray, order: int) -> np.ndarray:
    """``h_0 .. h_{order-1}`` (complete homogeneous symmetric) of each row of ``roots``."""
    return _mul_series(_unit(order), np.atleast_2d(roots), sign=-1.0, inverse=True)


def without_nodes(h: np.ndarray, removed: np.ndarray) -> np.ndarray:
    """``h_ν`` of a node set from ``h`` of a superset: times ``Π_{r ∈ removed}(1 − θ_r y)``.

    ``h`` is ``[rows, order]``, ``removed`` ``[rows, count]``: ``count`` short series steps
    instead of a sum over every remaining node.
    """
    return _mul_series(h, np.atleast_2d(removed), sign=-1.0)


def missing_complete(nodes: np.ndarray, d: int, order: int) -> np.ndarray:
    """``[n, order]``: ``h_ν`` of the nodes of the ``n - d`` workers lacking partition ``j``.

    Computed as ``h_ν(all nodes) · Π_{r ∈ H_j} (1 - θ_r y)`` over the ``d`` holders ``H_j``,
    a short series per partition instead of a sum over ``n - d`` nodes per order.
    """
    h_all = complete_symmetric(nodes[None, :], order)
    return without_nodes(h_all, nodes[holders(len(nodes), d)])


class EvaluationCode:
    """The numbers of an evaluation-point code: encoding tensor and decoding weights.

    ``nodes[w]`` is worker ``w``'s evaluation point (distinct reals, or complex numbers:
    then every array here is complex and payloads travel as pairs, see
    :func:`root_nodes`). Plain numerics, no scheme state, so tests can check it on the
    reference's own nodes (θ = 0..3).
    """

    def __init__(self, nodes: np.ndarray, s: int, m: int) -> None:
        nodes = np.asarray(nodes)
        self.nodes = nodes.astype(np.complex128 if np.iscomplexobj(nodes) else np.float64)
        self.n, self.s, self.m = len(self.nodes), s, m
        self.K = self.n - s
        n, d, theta = self.n, s + m, self.nodes
        hol = holders(n, d)  # [j, i] = worker
        h_missing = missing_complete(theta, d, m)  # [j, ν]
        x = theta[hol]  # [j, i] node of the i-th holder of j
        diff = x[:, :, None] - x[:, None, :]
        diff[:, np.arange(d), np.arange(d)] = 1.0
        denom = diff.prod(axis=2)  # [j, i]: Π_{r ∈ H_j∖w} (θ_w - θ_r)
        # q_{j,u}(θ_w) by Horner: q_u = x·q_{u-1} + h_{u-1}
        q = np.empty((n, d, m), dtype=theta.dtype)
        q[:, :, 0] = 1.0
        for u in range(1, m):
            q[:, :, u] = x * q[:, :, u - 1] + h_missing[:, u, None]
        encoding = np.zeros((n, n, m), dtype=theta.dtype)
        encoding[hol, np.arange(n)[:, None], :] = q / denom[:, :, None]
        self.row_scale = np.abs(encoding).reshape(n, -1).max(axis=1)
        self.encoding = encoding / self.row_scale[:, None, None]
        self._e_all = _mul_series(_unit(m), theta[None, :], sign=1.0)

    def difference_weights(self, chosen: np.ndarray, missing: np.ndarray) -> np.ndarray:
        """Packet weights of the divided difference of ``P`` over the nodes of ``chosen``.

        ``f[θ_Z] = Σ_{w∈Z} P(θ_w) / Π_{v∈Z∖w}(θ_w - θ_v)`` and packet ``w`` carries
        ``P(θ_w) / (Φ_w · row_scale_w)``, so the weight of packet ``w`` is
        ``row_scale_w · Π_{v ∉ Z}(θ_w - θ_v)`` (``missing`` = the complement of ``Z``):
        ``n - |Z|`` factors, nothing huge. Over ``K`` nodes this is the top coefficient of
        ``P`` (the classic decode); over ``K + i`` nodes it is the order ``K - 1 + i``
        divided difference that the pipelined code of :mod:`gclab.coding.pipelined` uses.
        """
        theta = self.nodes
        far = (theta[chosen][:, None] - theta[missing][None, :]).prod(axis=1)
        return far * self.row_scale[chosen]

    def weights(self, survivors: tuple[int, ...]) -> np.ndarray | None:
        """Decoding weights ``C[m, len(survivors)]`` (zero beyond the first K by worker id)."""
        if len(survivors) < self.K:
            return None
        chosen = np.sort(np.asarray(survivors))[: self.K]
        missing = np.setdiff1d(np.arange(self.n), chosen)
        theta = self.nodes
        # e_ν(θ_{F∖w}) = e_ν(all) / Π_{v ∉ F} (1 + θ_v y) / (1 + θ_w y)
        e_f = _mul_series(self._e_all, theta[missing][None, :], sign=1.0, inverse=True)
        e_fw = _mul_series(e_f, theta[chosen][:, None], sign=1.0, inverse=True)  # [w, ν]
        signs = (-1.0) ** np.arange(self.m)
        per_worker = (e_fw * signs).T * self.difference_weights(chosen, missing)  # [ν, w]
        dense = np.zeros((self.m, len(survivors)), dtype=per_worker.dtype)
        order = {w: i for i, w in enumerate(survivors)}
        dense[:, [order[int(w)] for w in chosen]] = per_worker[::-1]  # stream u = m - ν
        return dense


#: Warps of the ``real`` node family (:func:`search_nodes`): β of ``tan(β·x)/tan(β)`` on
#: [-1, 1] (0 = equispaced; larger β packs nodes toward the centre, away from Chebyshev crowding).
WARPS = (0.0, 0.8)


def straggler_patterns(n: int, s: int, randoms: int, seed: int) -> list[tuple[int, ...]]:
    """Contiguous, spread and random straggler sets of size ``s``: the classic hard cases.

    Shared by the stride search and the accuracy benchmark (which uses another seed).
    """
    if s == 0:
        return [()]
    sets = {tuple(sorted((start + i) % n for i in range(s))) for start in range(0, n, -(-n // 6))}
    sets |= {tuple(sorted({(off + i * n // s) % n for i in range(s)})) for off in range(2)}
    rng = np.random.default_rng(seed)
    sets |= {tuple(sorted(rng.choice(n, s, replace=False).tolist())) for _ in range(randoms)}
    return sorted(p for p in sets if len(p) == s)


def amplification(code: EvaluationCode, patterns: list[tuple[int, ...]]) -> float:
    """Worst float32 error amplification ``max_u ‖C[u] ∘ ‖E_F‖₁‖₂`` over straggler sets.

    A packet's rounding error is about ``eps·Σ|E[w]|·|g|``, so this bounds (up to the
    constant ``eps/√n``) the relative decode error of float32 payloads without sampling any.
    """
    row_l1 = np.abs(code.encoding).reshape(code.n, -1).sum(axis=1)
    worst = 0.0
    for stragglers in patterns:
        survivors = tuple(np.setdiff1d(np.arange(code.n), stragglers).tolist())
        weights = code.weights(survivors)
        amplified = np.abs(weights) * row_l1[list(survivors)]
        worst = max(worst, float(np.sqrt((amplified**2).sum(1)).max()))
    return worst


#: Node families of the evaluation codes (the ``construction`` of classic_cr and cce_cr).
NODE_FAMILIES = ("rotation", "real")


@cache
def search_nodes(family: str, n: int, s: int, m: int) -> tuple[float | complex, ...]:
    """Nodes for ``(n, s, m)`` from ``family``, the stride with the best conditioning.

    Worker ``w`` gets node number ``c·w mod n`` (``gcd(c, n) = 1``), so the ``s + m``
    holders of a partition and any run of contiguous stragglers land on spread-out nodes;
    which stride is best depends on (n, s, m), so every candidate is scored by
    :func:`amplification` over contiguous, spread and random straggler sets (a fixed
    seed: the construction is deterministic).

    * ``rotation``: the ``n``-th roots of unity (:func:`root_nodes`). Complex nodes, but
      real payloads of the same length: see :func:`root_nodes`.
    * ``real``: equispaced or tan-warped points of [-1, 1] (:data:`WARPS`). Real
      arithmetic throughout, but the real line has a heavy tail of badly conditioned
      straggler sets (float32 errors far above ``rotation``'s at large ``s``; measured in
      BENCHMARKS.md, "Numbers behind choices in the code").
    """
    if family not in NODE_FAMILIES:
        raise ValueError(f"unknown node family {family!r}; valid: {', '.join(NODE_FAMILIES)}")
    strides = [c for c in range(1, n // 2 + 1) if gcd(c, n) == 1] or [1]
    if family == "rotation":
        candidates = [root_nodes(n, c) for c in strides]
    else:
        candidates = [warped_nodes(n, c, warp) for c in strides for warp in WARPS]
    if s == 0 or len(candidates) == 1:
        return candidates[0]
    patterns = straggler_patterns(n, s, randoms=16, seed=12345)
    scores = [amplification(EvaluationCode(np.asarray(c), s, m), patterns) for c in candidates]
    return candidates[int(np.argmin(scores))]


def root_nodes(n: int, stride: int) -> tuple[complex, ...]:
    """Node of worker ``w``: the root of unity ``exp(2πi·(stride·w mod n)/n)``.

    Roots of unity keep every node distance in [2 sin(π/n), 2], so the products of the closed forms
    stay tame where real nodes crowd. The code is complex but nothing sent is: a
    partial gradient's consecutive float pairs ``(x, y)`` are read as ``x + iy``
    (``ndarray.view``), and multiplying by a coefficient ``a + ib`` is the real 2×2
    rotation-scaling ``[[a, -b], [b, a]]`` on the pair (the rotation-matrix embedding of
    Ramamoorthy & Tang, arXiv 1910.06515). A packet therefore has exactly the real code's
    ``⌈l/m⌉`` floats (rounded up to even), and the decoded pairs are the sum's floats.
    """
    return tuple(np.exp(2j * np.pi * ((stride * np.arange(n)) % n) / n))


def warped_nodes(n: int, stride: int, warp: float) -> tuple[float, ...]:
    """Node of worker ``w``: point ``stride·w mod n`` of ``n`` warped points in [-1, 1]."""
    grid = (2 * ((stride * np.arange(n)) % n) - (n - 1)) / n
    return tuple(np.tan(warp * grid) / np.tan(warp) if warp else grid)
