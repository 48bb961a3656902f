"""Static linear codes (``T = 0``): the encoding tensor ``E`` says it all.

One job per round; worker ``w`` sends

    f_w = Σ_j Σ_u E[w, j, u] · g_j^(u),

where ``g_j^(u) = g_j[u::m]`` is stream ``u`` of partial gradient ``j`` (``m = 1``: the
whole vector). Decoding from survivors ``F`` uses a weight matrix ``C[u, i]``: stream
``u`` of ``g = Σ_i C[u, i]·f_F[i]``, cached per survivor set and guarded by the float64
residual check of :mod:`gclab.coding.numerics`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import ClassVar

import numpy as np

from gclab.coding.contract import Decoder, Encoder, Part, Plan, Scheme, Task
from gclab.coding.numerics import RESIDUAL_TOL, as_streams, least_squares_weights, residual
from gclab.coding.partial import partial_sum
from gclab.coding.sums import WeightedSum, compile_sums
from gclab.errors import DecodeError


class LinearScheme(Scheme):
    """Base class for static codes: the encoding ``E`` (shape [n, k, m]) says it all.

    Parts are the k shards, worker w computes the parts its row of ``E`` touches, and
    decoding weights come from :meth:`decoding_weights` (least squares by default;
    subclasses override it with closed forms), cached per survivor set and guarded by
    a float64 residual check.

    ``E`` may be complex: payloads then stay real and are read as pairs of floats
    (``x + iy``), so every coefficient acts as a real 2×2 rotation-scaling on a pair
    (:func:`gclab.coding.evaluation.root_nodes` says why). Codes whose numbers are
    costly to build call :meth:`_init_placement` only and compute ``E`` when first
    needed; with ``exact_predicate`` the simulator's symbolic decoder never needs it.
    """

    #: Whether :meth:`tolerates` is exactly decodability (then symbolic decoding uses it).
    exact_predicate: bool = False
    partial = True

    encoding: np.ndarray

    def _init_linear(self, n: int, s: int, encoding: np.ndarray) -> None:
        """Set ``E`` (real or complex; 2-D means ``m = 1``) and the placement it implies."""
        encoding = np.asarray(encoding)
        self.encoding = encoding.astype(np.result_type(encoding, np.float64))
        if self.encoding.ndim == 2:
            self.encoding = self.encoding[:, :, None]
        placement = tuple(
            tuple(int(j) for j in np.flatnonzero(np.any(self.encoding[w] != 0, axis=1)))
            for w in range(n)
        )
        self._init_placement(n, s, placement, self.encoding.shape[2])

    def _init_placement(
        self, n: int, s: int, placement: tuple[tuple[int, ...], ...], m: int
    ) -> None:
        """Everything but ``E``: codes that build ``E`` lazily call this alone."""
        self.n, self.s, self.T, self.m = n, s, 0, m
        self.placement = placement
        self.parts = tuple(Part(j) for j in range(1 + max(j for p in placement for j in p)))

    @property
    def pairs(self) -> bool:
        """Whether payload floats are coded in pairs (a complex ``E``)."""
        return np.iscomplexobj(self.encoding)

    @cached_property
    def load(self) -> float:
        return max(len(p) for p in self.placement) / len(self.parts)

    @property
    def packet_fraction(self) -> float:
        return 1.0 / self.m

    def min_survivors(self) -> int:
        """How many packets a round needs at least; the predicate's default threshold."""
        return self.n - self.s

    def tolerates(self, erasures: np.ndarray) -> bool:
        erasures = np.asarray(erasures, dtype=bool).reshape(-1, self.n)[0]
        return int(np.count_nonzero(~erasures)) >= self.min_survivors()

    def decoding_weights(self, survivors: tuple[int, ...]) -> np.ndarray | None:
        """Weights ``C[m, len(survivors)]`` decoding the sum, or ``None`` if impossible.

        ``survivors`` are worker ids in arrival order. The default solves the least
        squares problem of the encoding restricted to the survivors; the residual check
        in :meth:`checked_weights` decides whether it really decodes.
        """
        return least_squares_weights(self.encoding, survivors)

    def partial_cover(self, survivors: tuple[int, ...]) -> tuple[int, ...]:
        """The parts whose gradient sum the packets of ``survivors`` determine exactly.

        :meth:`Decoder.decode_partial` applies their sum when a job does not decode
        (:mod:`gclab.coding.partial` finds the weights). The default is the parts of
        the survivors that hold one part (uncoded placement): a packet that mixes parts
        determines none on its own, and the cyclic codes, whose packets are values of
        one polynomial (docs/design.md, "Partial recovery"), determine no partition sum
        from fewer than ``n − s`` packets.
        """
        single = (self.placement[w] for w in survivors if len(self.placement[w]) == 1)
        return tuple(sorted(p for parts in single for p in parts))

    #: Whether decoding depends on the order packets arrived in (ignore_stragglers).
    order_matters: ClassVar[bool] = False

    def checked_weights(
        self, survivors: tuple[int, ...]
    ) -> tuple[tuple[int, ...], np.ndarray] | None:
        """``(used workers, weights)`` for a survivor set, or ``None`` if not decodable.

        Raises :class:`DecodeError` when weights exist but fail the residual check
        (a numerically broken decode is an error, never a silently wrong gradient).
        """
        if not survivors:
            return None
        weights = self.decoding_weights(survivors)
        if weights is None:
            return None
        if self.exact:
            res = self.residual(survivors, weights)
            if res > RESIDUAL_TOL:
                raise DecodeError(
                    f"{self.describe()}: decoding weights for survivors {sorted(survivors)} "
                    f"fail the residual check ({res:.2e} > {RESIDUAL_TOL:.0e})."
                )
        keep = np.flatnonzero(np.any(weights != 0, axis=0))
        return tuple(survivors[i] for i in keep), weights[:, keep]

    def residual(self, survivors: tuple[int, ...], weights: np.ndarray) -> float:
        """‖C·E_F − I‖ (max abs), in float64: 0 for a perfect decode."""
        return residual(self.encoding, survivors, weights)

    def encoder(self, worker: int) -> Encoder:
        return LinearEncoder(self, worker)

    def decoder(self, grad_size: int | None = None) -> Decoder:
        return LinearDecoder(self, grad_size)


class LinearEncoder(Encoder):
    """Stateless encoder of a :class:`LinearScheme`: one weighted sum of partials.

    The sum is accumulated in float64 (complex128) and rounded to the partials' dtype
    once: a float32 running sum would round after every term, and with the cancellation
    inside a coded packet that multiplies the decode error at large ``s`` (measured in
    BENCHMARKS.md, "Numbers behind choices in the code").
    """

    def __init__(self, scheme: LinearScheme, worker: int) -> None:
        self.coefficients = scheme.encoding[worker]  # [k, m], float64 or complex128
        self.m = scheme.m
        self.pairs = scheme.pairs

    def encode(self, round: int, partials: Mapping[Task, np.ndarray]) -> np.ndarray:
        packet: np.ndarray | None = None
        for task, grad in partials.items():
            coef = self.coefficients[task.part]
            streams = as_streams(grad, self.m, self.pairs)  # [l/m, m] (pairs: [l/2m, m])
            # widened to float64/complex128; the explicit dtype matters for numpy < 2,
            # which keeps float32 for an array times a scalar
            wide = np.result_type(streams.dtype, coef.dtype)
            term = streams @ coef if self.m > 1 else np.multiply(streams[:, 0], coef[0], dtype=wide)
            packet = term if packet is None else np.add(packet, term, out=packet)
        if packet is None:
            raise DecodeError(f"round {round}: worker has no partial gradients to encode.")
        packet = packet.astype(streams.dtype)
        return packet.view(grad.dtype) if self.pairs else packet


class LinearDecoder(Decoder):
    """Decoder of a :class:`LinearScheme`: job r is decoded from round r's packets."""

    STATE = ("_arrived", "_decoded")

    def __init__(self, scheme: LinearScheme, grad_size: int | None) -> None:
        super().__init__(scheme, grad_size)
        self.scheme: LinearScheme = scheme
        self._arrived: dict[int, dict[int, np.ndarray | None]] = {}
        self._decoded: set[int] = set()
        # used workers and their weights, prepared for the pass (None: symbolic), by survivors
        self._cache: dict[tuple[int, ...], tuple[tuple[int, ...], WeightedSum | None] | None] = {}
        if not self.symbolic:  # the decode without loss: solved, its kernels loaded, before a clock
            try:
                solution = self._solution_of(tuple(range(scheme.n)))
            except DecodeError:  # a broken code: decode() raises it for the round it meets
                solution = None
            if solution is not None and solution[1] is not None:
                compile_sums(solution[1].weights)

    def plan(self, round: int) -> Plan:
        return tuple(tuple(Task(round, j) for j in parts) for parts in self.scheme.placement)

    def receive(self, round: int, worker: int, packet: np.ndarray | None) -> None:
        self.receive_many(round, (worker,), (packet,))

    def receive_many(
        self, round: int, workers: Sequence[int], packets: Sequence[np.ndarray | None]
    ) -> None:
        if round in self._decoded:
            return
        arrived = self._arrived.setdefault(round, {})
        for worker, packet in zip(workers, packets):
            arrived.setdefault(worker, packet)

    def _solution(self, round: int) -> tuple[tuple[int, ...], WeightedSum | None] | None:
        return self._solution_of(tuple(self._arrived.get(round, {})))

    def _solution_of(
        self, survivors: tuple[int, ...]
    ) -> tuple[tuple[int, ...], WeightedSum | None] | None:
        """Used workers and their weights (ready for the pass; ``None`` in symbolic mode) of
        a survivor set (in arrival order), cached."""
        key = survivors if self.scheme.order_matters else tuple(sorted(survivors))
        if key not in self._cache:
            if self.symbolic and self.scheme.exact_predicate:
                self._cache[key] = self._symbolic_solution(survivors)
            else:
                solution = self.scheme.checked_weights(survivors)
                if solution is not None:
                    used, weights = solution
                    solution = (used, None if self.symbolic else WeightedSum(weights))
                self._cache[key] = solution
        return self._cache[key]

    def _symbolic_solution(self, survivors: tuple[int, ...]) -> tuple[tuple[int, ...], None] | None:
        """The exact predicate's verdict: no code numbers are needed to simulate a round."""
        erased = np.ones(self.scheme.n, dtype=bool)
        erased[list(survivors)] = False
        return (survivors, None) if self.scheme.tolerates(erased) else None

    def decodable(self) -> list[int]:
        return sorted(r for r in self._arrived if r not in self._decoded and self._solution(r))

    def decode(self, job: int) -> np.ndarray | None:
        solution = self._solution(job)
        if solution is None:
            raise DecodeError(
                f"job {job} is not decodable from workers {sorted(self._arrived.get(job, {}))}."
            )
        used, weights = solution
        packets = self._arrived.pop(job)
        self._decoded.add(job)
        if self.symbolic:
            return None
        return weights([packets[w] for w in used], self.grad_size, self.outputs)

    def decode_partial(self, job: int) -> tuple[np.ndarray | None, float]:
        packets = self._arrived.pop(job, {})
        self._decoded.add(job)
        return partial_sum(self.scheme, packets, self.grad_size)

    def wanted(self, job: int) -> list[tuple[int, int]]:
        if job in self._decoded:
            return []
        have = self._arrived.get(job, {})
        return [(job, w) for w in range(self.scheme.n) if w not in have]

    def serves(self, round: int, jobs: int) -> bool:
        return round < jobs and round not in self._decoded
