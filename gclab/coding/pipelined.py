"""Pipelined gradient codes for packet loss: coding across workers *and* time (docs/design.md).

Worker ``w`` computes only the new job's ``s + 1`` partial gradients each round and sends
one packet mixing its partials of the last ``T + 1`` jobs; job ``t`` is due at the end of
round ``t + T``. ``T = 0`` is classic GC, packet for packet (to one float32 rounding)
and decode for decode.

``pipelined_cr`` (time-coded cyclic GC, docs/design.md, "Codes across time") on the real
evaluation-point code of ``classic_cr construction=real`` (:mod:`gclab.coding.evaluation`;
the job-space solves and the contraction argument of :func:`lag_scale` are real, so it keeps
real nodes). Round ``τ``'s packets are evaluations ``f_w = P_τ(θ_w) / σ_w`` (``σ_w`` the
classic per-worker scale) of the polynomial

    P_τ(x) = A_τ(x) + Σ_{k=0..T} g(τ−k) · x^(K−1+k),     deg A_τ < K − 1,  K = n − s,

i.e. that section's ``X`` is the monomials below ``K − 1`` (the interference ``A(τ)``) and
``Y_k[w] = θ_w^(K−1+k)/σ_w``. Partition ``j``'s share of lag ``k`` must vanish on the
``K − 1`` workers lacking ``j``: it is ``x^(K−1+k)`` minus its remainder modulo
``Π_{r∈R_j}(x − θ_r)``, i.e. ``q_{j,k}(x)·Π_{r∈R_j}(x − θ_r)`` with
``q_{j,k} = Σ_{ν≤k} h_ν(θ_{R_j}) x^(k−ν)`` (the quotient), so

    G_k[j, w] = E_classic[w, j] · q_{j,k}(θ_w),          q_{j,0} = 1.

Why this construction: it reuses the classic code's conditioning search and closed
forms, ``T = 0`` is exactly ``classic_cr construction=real``, and decoding needs no large solve. The
interference is eliminated in closed form: the divided difference of round ``τ``'s
packets over ``K + i`` received nodes ``Z`` kills ``A_τ`` and equals
``Σ_k h_{k−i}(θ_Z)·g(τ−k)`` (``f[θ_Z]`` of ``x^p`` is ``h_{p−|Z|+1}(θ_Z)``), with packet
weights of ``s − i`` factors (:meth:`EvaluationCode.difference_weights`). What is left is
a tiny system over the jobs only (at most ``(T+1)²`` equations), solved by SVD.

``pipelined_fr``: FR groups of ``s + 1``; member ``m`` of group ``q`` sends
``Σ_k z_m^k · h_q(τ−k)`` with distinct nodes ``1/4 ≤ z_m < 1/2`` (``z^0 = 1``: ``T = 0`` is

Both are stream schemes (:class:`~gclab.coding.stream.StreamScheme`): they state their blocks, lag
coefficients and per-round equations, and share its decoder and accumulating encoder.
"""

from __future__ import annotations

import numpy as np

from gclab.coding import params
from gclab.coding.evaluation import (
    EvaluationCode,
    complete_symmetric,
    missing_complete,
    search_nodes,
    without_nodes,
)
from gclab.coding.stream import Equations, StreamScheme


class PipelinedCR(StreamScheme):
    """Time-coded cyclic GC: tolerates any ``≤ (T+1)·s`` losses in rounds ``t..t+T``."""

    name = "pipelined_cr"

    def __init__(self, n: int, s: int = 1, T: int = 2) -> None:
        self._check_workers(n)
        s = params.stragglers(n, s)
        T = params.delay(T)
        self.code = EvaluationCode(np.asarray(search_nodes("real", n, s, 1)), s, 1)
        shifted = self.code.nodes + node_shift(self.code.nodes)
        self.lag_scale = lag_scale(missing_complete(shifted, s + 1, T + 1))
        self.time_nodes = theta = self.lag_scale * shifted
        self.h_all = complete_symmetric(theta[None, :], T + 1)  # h_ν of every time node
        h_missing = missing_complete(theta, s + 1, T + 1)  # [j, ν] of the K-1 non-holders
        q = np.empty((n, n, T + 1))  # q_{j,k}(θ_w) as [w, j, k], by Horner
        q[:, :, 0] = 1.0
        for k in range(1, T + 1):
            q[:, :, k] = theta[:, None] * q[:, :, k - 1] + h_missing[None, :, k]
        self.lag_coefficients = self.code.encoding[:, :, :1] * q
        self.blocks = (tuple(range(n)),)
        self._init_stream(n, s, T)

    def equations(self, received: tuple[int, ...]) -> Equations:
        K, T = self.n - self.s, self.T
        count = min(len(received) - K + 1, T + 1)
        if count <= 0:
            return np.zeros((0, len(received))), np.zeros((0, T + 1))
        theta = self.time_nodes
        chosen_all = np.asarray(received)
        weights = np.zeros((count, len(received)))
        lags = np.zeros((count, T + 1))
        for i in range(count):
            chosen = chosen_all[: K + i]
            missing = np.setdiff1d(np.arange(self.n), chosen)
            weights[i, : K + i] = self.code.difference_weights(chosen, missing)
            # weights are f[θ_Z] scaled by ρ^i (ρ = lag_scale), see lag_scale
            h = without_nodes(self.h_all[:, : T + 1 - i], theta[missing])[0]
            lags[i, i:] = self.lag_scale**i * h
        return weights, lags


def lag_scale(h: np.ndarray) -> float:
    """``ρ``: lag ``k`` enters the packets scaled by ``ρ^k`` (time nodes ``ρ·θ``).

    A job decoded with earlier jobs on the right-hand side inherits their rounding
    errors times the lag coefficients ``ρ^k·h_k``; over hundreds of lossy rounds that
    recursion grows geometrically unless it is contractive (with ``ρ = 1``, n = 16,
    s = 1, T = 2 the error grew ×1.7 per job). With ``r = max_k max|h_k|^(1/k)`` over the
    node sets the encoding uses (``h`` = :func:`missing_complete`, ``[sets, T+1]``) and
    ``ρ = 1/(2r)``, ``Σ_k ρ^k·|h_k| ≤ 1 − 2^-T``. The price: a job decoded ``k`` rounds
    late amplifies packet rounding by ``ρ^-k`` (≈ 15 at n = 16, T = 2).
    """
    top = np.abs(h[:, 1:]).max(axis=0)
    radius = max((float(v) ** (1.0 / (k + 1)) for k, v in enumerate(top)), default=0.0)
    return min(1.0, 0.5 / radius) if radius > 0 else 1.0


def node_shift(nodes: np.ndarray) -> float:
    """``(1 − 1/φ)``× the smallest node gap: breaks the symmetry of the classic node set.

    Only the lag coefficients see absolute node positions (``E`` and the difference
    weights depend on differences, so ``T = 0`` is unchanged). On a node set symmetric
    about 0, ``h_1`` of two received sets can coincide exactly (a lost node at 0) and
    some ``≤ (T+1)s``-loss patterns stop decoding (10 of the 455 three-loss patterns of
    (n,s,T) = (5,1,2)); an irrational fraction of the gap rules such coincidences out
    while keeping the nodes (and so the ``h_ν``, i.e. the conditioning) near 0.
    """
    gaps = np.diff(np.sort(nodes))
    return float((1 - 2 / (1 + 5**0.5)) * gaps.min()) if gaps.size else 0.0


class PipelinedFR(StreamScheme):
    """Time-coded FR: per group, any ``≤ (T+1)·s`` losses in rounds ``t..t+T`` decode."""

    name = "pipelined_fr"

    def __init__(self, n: int, s: int = 1, T: int = 2) -> None:
        self._check_workers(n)
        s = params.fr_stragglers(n, s)
        T = params.delay(T)
        d = s + 1
        self.member_lags = self.member_nodes(d)[:, None] ** np.arange(T + 1)[None, :]
        coefficients = np.zeros((n, n, T + 1))
        for w in range(n):
            start = w - w % d
            coefficients[w, start : start + d, :] = self.member_lags[w % d]
        self.lag_coefficients = coefficients
        self.blocks = tuple(tuple(range(q, q + d)) for q in range(0, n, d))
        self._init_stream(n, s, T)

    @staticmethod
    def member_nodes(d: int) -> np.ndarray:
        """Nodes ``z_m = (d + m)/(4d)`` in ``[1/4, 1/2)``.

        Distinct and positive: every ``≤ T + 1`` rows of ``[z_m^k]`` are independent and the
        counts of test vector 9 (docs/design.md) hold (``(1, 4/3, 5/3)``-proportional for
        s = 2; ``(1, 2, 3)/6`` loses one 6-loss pattern). Scaling nodes by ``c`` scales lag
        ``k`` by ``c^k``, which keeps every rank; below 1/2 the lag coefficients of a decode
        with earlier jobs on the right-hand side sum to less than 1, so rounding errors
        cannot grow from job to job (with nodes in [1, 2) they reached 1e48 after 600 lossy
        rounds, n = 16, s = 1).
        """
        return (d + np.arange(d)) / (4.0 * d)

    def equations(self, received: tuple[int, ...]) -> Equations:
        rows = list(received[: self.T + 1])
        weights = np.zeros((len(rows), len(received)))
        weights[np.arange(len(rows)), np.arange(len(rows))] = 1.0
        return weights, self.member_lags[rows]
