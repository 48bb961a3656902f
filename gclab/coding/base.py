"""The scheme contract: the one interface every gradient-coding scheme implements.

A scheme is a plain Python object (numpy only: no Ray, no torch) so that the Ray
runtime and the simulator drive exactly the same code. To add a scheme, subclass
:class:`Scheme` (or :class:`LinearScheme` for a static code with one job per round),
set ``name`` and state the parameters once, in ``__init__``'s signature (``n`` first):
the class registers itself (:data:`SCHEMES`) and the config layer derives its Hydra
schema from the signature; add ``gclab/conf/scheme/<name>.yaml`` (README: "Adding a
scheme").

Vocabulary (docs/design.md, "Notation" and "The scheme contract"):

* ``n`` logical workers, ``k`` data shards (``k = n`` for every built-in scheme).
* A *job* is one SGD step on a global batch; job ``t`` starts in round ``t``.
* A job's batch is split into *parts*: a part is a slice of the samples the job draws
  from one shard (:class:`Part`). The partial gradient of a part is the *sum* of its
  per-sample gradients, so the sum over all parts of a job is the batch gradient.
* A *task* ``(job, part)`` is one partial gradient a worker computes in a round.
* Each worker sends one *packet* per round (:class:`Encoder`); the master feeds the
  packets that arrive to a :class:`Decoder`, which says which jobs are decodable and
  decodes them. ``T`` is the number of extra rounds a job may take to decode.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from gclab.errors import ConfigError, DecodeError

#: Largest tolerated ‖residual‖ of a decoding solution (computed in float64).
RESIDUAL_TOL = 1e-8


@dataclass(frozen=True)
class Part:
    """Samples ``[lo, hi)`` (as fractions) of the per-job samples drawn from ``shard``."""

    shard: int
    lo: float = 0.0
    hi: float = 1.0


@dataclass(frozen=True)
class Task:
    """Compute the partial gradient of ``part`` of ``job``."""

    job: int
    part: int


Plan = tuple[tuple[Task, ...], ...]
"""Tasks per worker for one round: ``plan[w]`` is what worker ``w`` computes."""


@dataclass(frozen=True)
class Shape:
    """What a setting of a scheme states before it runs (:meth:`Scheme.shape`)."""

    load: float  # Scheme.load
    T: int  # Scheme.T
    packet_fraction: float  # Scheme.packet_fraction
    description: str  # Scheme.describe()


class Encoder(ABC):
    """Worker-side encoder; may keep state across rounds (running sums of earlier jobs)."""

    @abstractmethod
    def encode(self, round: int, partials: Mapping[Task, np.ndarray]) -> np.ndarray:
        """Turn this round's partial gradients (one per planned task) into one packet."""

    def state_dict(self) -> dict[str, Any]:
        """What the encoder carries from round to round, as numpy arrays and plain values.

        A checkpoint stores it between rounds, and :meth:`load_state_dict` on a fresh
        encoder of the same worker then encodes the next rounds exactly as this one
        would (a resumed run). Stateless encoders keep the default: nothing.
        """
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (from :meth:`state_dict` of an encoder of this worker)."""
        for name, value in state.items():
            setattr(self, name, value)


class Decoder(ABC):
    """Master-side decoder, stateful across rounds.

    In *symbolic* mode (``grad_size is None``) packets are ``None``: the decoder only
    tracks which packets arrived and which jobs they make decodable. The simulator uses
    this mode, the runtime the real one, so both see the same decodability.
    """

    #: Attributes that carry state from round to round: everything :meth:`state_dict`
    #: saves. Caches that are rebuilt on demand stay out.
    STATE: ClassVar[tuple[str, ...]] = ()

    def __init__(self, scheme: Scheme, grad_size: int | None) -> None:
        self.scheme = scheme
        self.grad_size = grad_size
        # results of this round and the last (the driver holds those until the next round)
        self.outputs = Outputs(limit=3)

    @property
    def symbolic(self) -> bool:
        return self.grad_size is None

    def state_dict(self) -> dict[str, Any]:
        """The decoder's state between rounds (:attr:`STATE`): packets it keeps, jobs it
        decoded or is still waiting for, plans it froze; numpy arrays and plain values.

        A checkpoint stores it after a round; :meth:`load_state_dict` on a fresh decoder
        of the same scheme then continues exactly where this one stopped (a resumed run
        of a scheme with T > 0 needs the packets of jobs not decoded yet). The values are
        the decoder's own objects, not copies: save them before the next round.
        """
        return {name: getattr(self, name) for name in self.STATE}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (:meth:`state_dict` of a decoder of the same scheme)."""
        for name in self.STATE:
            setattr(self, name, state[name])

    @abstractmethod
    def plan(self, round: int) -> Plan:
        """The tasks of every worker in ``round`` (may depend on earlier arrivals)."""

    @abstractmethod
    def receive(self, round: int, worker: int, packet: np.ndarray | None) -> None:
        """Record that the packet of ``worker`` from ``round`` arrived (possibly late)."""

    def receive_many(
        self, round: int, workers: Sequence[int], packets: Sequence[np.ndarray | None]
    ) -> None:
        """:meth:`receive` for several packets of ``round``, in order.

        The protocol delivers a round's on-time packets with one call: at n = 256 a
        parameter search makes millions of deliveries, and decoders that override this
        handle a whole round at once.
        """
        for worker, packet in zip(workers, packets):
            self.receive(round, worker, packet)

    @abstractmethod
    def decodable(self) -> list[int]:
        """Jobs decodable from what arrived and not yet decoded, ascending."""

    @abstractmethod
    def decode(self, job: int) -> np.ndarray | None:
        """Return job's gradient (float64; ``None`` in symbolic mode) and forget it.

        Raises :class:`DecodeError` when the job is not decodable or when the residual
        check of its decoding coefficients fails: never a silently wrong gradient. A later
        decode may write into the returned array's memory once nothing refers to it or to
        a view of it any more (:class:`Outputs`), so hold the array, not a raw pointer.
        """

    def decode_partial(self, job: int) -> tuple[np.ndarray | None, float]:
        """``(gradient sum, coverage)`` of a due job that is not decodable, and forget it.

        ``network.recovery=partial`` applies it instead of waiting: the gradient is the
        exact sum of the parts the arrived packets determine, rescaled to the batch
        (times total parts / covered parts), and ``coverage`` is the covered fraction of
        the parts, in ``[0, 1)``. The gradient is ``None`` in symbolic mode and when
        nothing is covered (the server then takes no step). Schemes with
        :attr:`Scheme.partial` implement it; the others are refused before a run starts.
        """
        raise NotImplementedError(f"{self.scheme.describe()} has no partial decoding.")

    @abstractmethod
    def wanted(self, job: int) -> list[tuple[int, int]]:
        """``(round, worker)`` of packets not yet received that could help decode ``job``.

        The round protocol retransmits or waits for these, in this order, when a job
        is due but not decodable.
        """

    @abstractmethod
    def serves(self, round: int, jobs: int) -> bool:
        """Whether ``round``'s packets would carry work for a job ``< jobs`` not decoded yet.

        Engines skip a round that serves no such job (after the last job starts, a round
        may have nothing left to do) and end the run when every job is decoded. A
        decoder with dynamic plans freezes the round's plan here, as :meth:`plan` does.
        """


class Registry(dict[str, type["Scheme"]]):
    """Scheme classes by ``name``, filled as the classes are defined.

    Listeners (the config layer, which derives each scheme's Hydra schema) hear of every
    class already registered when they subscribe and of every later one when it is
    defined, so a scheme module outside gclab needs no line anywhere else.
    """

    def __init__(self) -> None:
        super().__init__()
        self._listeners: list[Callable[[type[Scheme]], None]] = []

    def add(self, cls: type[Scheme]) -> None:
        """Register ``cls`` under ``cls.name`` (a redefinition of the same class replaces it)."""
        old = self.get(cls.name)
        if old is not None and old.__qualname__ != cls.__qualname__:
            raise TypeError(
                f"scheme name {cls.name!r} is taken by {old.__module__}.{old.__qualname__}."
            )
        self[cls.name] = cls
        for listener in self._listeners:
            listener(cls)

    def subscribe(self, listener: Callable[[type[Scheme]], None]) -> None:
        """Call ``listener`` with every scheme class, now and as they are defined."""
        self._listeners.append(listener)
        for cls in list(self.values()):
            listener(cls)


#: Every scheme class, by name: a class that sets ``name`` is a scheme option.
SCHEMES = Registry()


class Scheme(ABC):
    """A gradient-coding scheme: placement, per-round plans, encoder, decoder.

    Subclasses set the attributes below in ``__init__`` and validate their parameters
    there, raising :class:`ConfigError` with one sentence naming the bad value and
    what would be valid. A subclass that sets ``name`` is registered in
    :data:`SCHEMES` when it is defined.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            SCHEMES.add(cls)

    #: Name used in configs and reports (``scheme=<name>``).
    name: ClassVar[str]
    #: Whether the decoded gradient equals the true batch gradient (up to rounding).
    exact: ClassVar[bool] = True
    #: Whether the decoder implements :meth:`Decoder.decode_partial`
    #: (``network.recovery=partial``): static codes, whose jobs end with their round.
    partial: ClassVar[bool] = False

    n: int
    s: int
    T: int = 0
    parts: tuple[Part, ...]
    placement: tuple[tuple[int, ...], ...]

    @property
    def k(self) -> int:
        """Number of data shards."""
        return 1 + max(p.shard for p in self.parts)

    @property
    @abstractmethod
    def load(self) -> float:
        """Work per worker per round as a fraction of one full (batch) gradient."""

    @property
    def packet_fraction(self) -> float:
        """Packet length relative to the gradient (``1/m`` for CCE codes)."""
        return 1.0

    @property
    def decoded_coverage(self) -> float:
        """The fraction of the batch gradient a decoded job covers: 1 for exact schemes."""
        return 1.0

    @abstractmethod
    def tolerates(self, erasures: np.ndarray) -> bool:
        """Whether an erasure pattern fits the scheme's model.

        ``erasures`` is a boolean array ``[rounds, n]`` (``True`` = packet erased) over
        the rounds a job may use (``T + 1`` rows, starting at the job's round), with all
        earlier jobs decoded. For ``T = 0`` a 1-D array of length ``n`` is accepted too.
        """

    @classmethod
    def search_grid(cls, n: int, recovery: str) -> list[dict[str, Any]] | None:
        """The parameter settings ``sim.search=true`` tries for ``n`` workers, or ``None``.

        Each setting is a dict of constructor keywords (``n`` aside). ``recovery`` is
        ``network.recovery``: a grid may drop settings whose runs that rule makes
        identical. ``None`` (the default): the scheme has nothing to search.
        """
        return None

    @classmethod
    def shape(cls, n: int, **params: Any) -> Shape:
        """The load, ``T``, packet fraction and description of the scheme built with
        ``n`` and ``params``. By default it is built and asked; a scheme whose search grid
        is large states them from its parameters instead, since the fast search asks for
        every setting (``tests/coding/test_shape.py`` holds each to its built scheme's).
        """
        scheme = cls(n, **params)
        return Shape(scheme.load, scheme.T, scheme.packet_fraction, scheme.describe())

    def straggler_model(self) -> StragglerModel:
        """The straggler model the scheme is designed for, checked round by round.

        ``network.recovery=wait_all`` (the SGC papers' rule) closes a round on time only
        if this model admits the round's erasures, and otherwise waits for every packet.
        The default applies :meth:`tolerates` to every job whose window holds the round
        (:class:`WindowModel`); schemes whose model has its own memory override this.
        """
        return WindowModel(self)

    @abstractmethod
    def encoder(self, worker: int) -> Encoder:
        """A fresh encoder for ``worker``."""

    @abstractmethod
    def decoder(self, grad_size: int | None = None) -> Decoder:
        """A fresh decoder; ``grad_size=None`` gives the symbolic (simulator) mode."""

    def describe(self) -> str:
        """Short human-readable name with parameters, for logs and reports."""
        return f"{self.name}(n={self.n}, s={self.s}, T={self.T})"

    def _check_workers(self, n: int) -> None:
        if not isinstance(n, (int, np.integer)) or n < 1:
            raise ConfigError(f"cluster.workers={n!r} is invalid: it must be an integer >= 1.")


class StragglerModel(ABC):
    """A scheme's straggler model as the round protocol checks it (``network.recovery=wait_all``).

    Each round the protocol asks :meth:`admits` whether the round's erasures at the
    close (late or lost packets) fit the model, given the rounds before; then it calls
    :meth:`settle` with the straggler pattern the round leaves behind: those erasures
    if admitted, none if the master waited for every packet. One instance serves one run.
    """

    def __init__(self, scheme: Scheme) -> None:
        self.scheme = scheme

    @abstractmethod
    def admits(self, round: int, erased: np.ndarray, decoder: Decoder) -> bool:
        """Whether the erasures ``erased`` (``bool [n]``) of ``round`` fit the model."""

    @abstractmethod
    def settle(self, round: int, erased: np.ndarray, decoder: Decoder) -> None:
        """Record ``round``'s straggler pattern ``erased`` for the checks of later rounds."""

    def runs(self, round: int, jobs: int, decoder: Decoder) -> bool:
        """Whether the papers' master runs ``round`` of a run of ``jobs`` jobs.

        By default when it serves a job not decoded yet (:meth:`Decoder.serves`), the
        rule of ``network.recovery=decodable`` too; a scheme whose published simulator
        charges other rounds says so here.
        """
        return decoder.serves(round, jobs)


class WindowModel(StragglerModel):
    """:meth:`Scheme.tolerates` on the window of every job that the round belongs to.

    Job ``j`` uses rounds ``j .. j+T``; the round's erasures are admitted if, for every
    such job, the erasures of its rounds so far (later rounds taken as erasure-free)
    are tolerated. With ``T = 0`` this is :meth:`Scheme.tolerates` of the round alone;
    for the job due in the round it is the exact predicate of its whole window.
    """

    def __init__(self, scheme: Scheme) -> None:
        super().__init__(scheme)
        self.history: dict[int, np.ndarray] = {}

    def admits(self, round: int, erased: np.ndarray, decoder: Decoder) -> bool:
        T, n = self.scheme.T, self.scheme.n
        for job in range(max(0, round - T), round + 1):
            window = np.zeros((T + 1, n), dtype=bool)
            for q in range(job, round):
                window[q - job] = self.history.get(q, False)
            window[round - job] = erased
            if not self.scheme.tolerates(window):
                return False
        return True

    def settle(self, round: int, erased: np.ndarray, decoder: Decoder) -> None:
        self.history[round] = np.array(erased, dtype=bool)
        self.history.pop(round - self.scheme.T, None)


# ---------------------------------------------------------------------------------------
# Static linear codes (T = 0): one job per round, worker w sends
#     f_w = sum_j sum_u E[w, j, u] * g_j^(u),
# where g_j^(u) = g_j[u::m] is stream u of partial gradient j (m = 1: the whole vector).
# Decoding from survivors F uses a weight matrix C[u, i]: stream u of g = sum_i C[u,i] f_F[i].
# ---------------------------------------------------------------------------------------


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


def least_squares_weights(encoding: np.ndarray, survivors: tuple[int, ...]) -> np.ndarray | None:
    """Decoding weights ``C[m, len(survivors)]`` of ``E`` (``[n, k, m]``) by least squares.

    ``None`` when the system is inconsistent (the survivors cannot decode); the caller's
    residual check (:meth:`LinearScheme.checked_weights`) judges the accuracy of the rest.
    """
    e = encoding[list(survivors)]  # [F, k, m]
    m = e.shape[2]
    a = e.transpose(1, 2, 0).reshape(-1, len(survivors))  # rows (j, u'), columns i
    target = np.tile(np.eye(m), (e.shape[1], 1))  # [(j, u'), u]
    # sum_i C[u,i] E[F_i, j, u'] = delta(u, u') for every part j
    weights = np.linalg.lstsq(a, target, rcond=None)[0].T
    if residual(encoding, survivors, weights) > 1e-6:
        return None
    return weights


def residual(encoding: np.ndarray, survivors: tuple[int, ...], weights: np.ndarray) -> float:
    """‖C·E_F − I‖ (max abs) of weights ``C`` for the rows ``F = survivors`` of ``E``."""
    e = encoding[list(survivors)]  # [F, k, m]
    got = np.einsum("ui,ijv->juv", weights, e)  # [k, m, m]
    want = np.broadcast_to(np.eye(e.shape[2]), got.shape)
    return float(np.max(np.abs(got - want)))


def pad_length(size: int, m: int) -> int:
    """Gradient length padded up to a multiple of ``m`` (streams of equal length)."""
    return -(-size // m) * m


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


def as_streams(vector: np.ndarray, m: int, pairs: bool = False) -> np.ndarray:
    """``[length, m]`` view of a real vector's ``m`` interleaved streams (zero-padded).

    With ``pairs`` consecutive floats ``(x, y)`` are read as one complex ``x + iy`` first
    (a view, no copy, when no padding is needed), for codes with a complex ``E``.
    """
    if pairs and vector.dtype not in (np.float32, np.float64):
        raise TypeError(f"float pairs need float32 or float64 payloads, not {vector.dtype}.")
    vector = np.ascontiguousarray(vector)
    width = 2 * m if pairs else m
    padded = pad_length(vector.size, width)
    if padded != vector.size:
        vector = np.concatenate([vector, np.zeros(padded - vector.size, dtype=vector.dtype)])
    if pairs:
        vector = vector.view(np.result_type(vector.dtype, np.complex64))
    return vector.reshape(-1, m)


class LinearDecoder(Decoder):
    """Decoder of a :class:`LinearScheme`: job r is decoded from round r's packets."""

    STATE = ("_arrived", "_decoded")

    def __init__(self, scheme: LinearScheme, grad_size: int | None) -> None:
        super().__init__(scheme, grad_size)
        self.scheme: LinearScheme = scheme
        self._arrived: dict[int, dict[int, np.ndarray | None]] = {}
        self._decoded: set[int] = set()
        self._cache: dict[tuple[int, ...], tuple[tuple[int, ...], np.ndarray] | None] = {}

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

    def _solution(self, round: int) -> tuple[tuple[int, ...], np.ndarray] | None:
        survivors = tuple(self._arrived.get(round, {}))
        key = survivors if self.scheme.order_matters else tuple(sorted(survivors))
        if key not in self._cache:
            self._cache[key] = (
                self._symbolic_solution(survivors)
                if self.symbolic and self.scheme.exact_predicate
                else self.scheme.checked_weights(survivors)
            )
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
        return combine([packets[w] for w in used], weights, self.grad_size, self.outputs)

    def decode_partial(self, job: int) -> tuple[np.ndarray | None, float]:
        from gclab.coding.partial import partial_sum  # it builds on this module

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


#: Stream positions combined per pass (at most): ``vectors × chunk`` float64 values stay in cache.
COMBINE_CHUNK = 1 << 14

#: Float64 values per pass: the chunk is narrowed for many vectors (M-SGC reads n(W−1) and
#: more, n = 256 reads 241), so that ``vectors × chunk`` stays in cache (BENCHMARKS.md).
COMBINE_BLOCK = 1 << 17

Sum = tuple[Sequence[np.ndarray], np.ndarray]
"""``(vectors, weights C[m, len(vectors)])``: the streams ``Σ_i C[u,i]·vector_i``, u < m."""


class Outputs:
    """Float64 result arrays of a decoder, reused once nothing but this pool refers to them.

    A fresh gradient-sized array costs about one more pass over it (the kernel zeroes each
    page on first touch), which is most of a decode that reads one packet per FR group.
    An array the caller or the decoder still holds, itself or through a view (a view keeps
    its base alive), is never handed out again: CPython's reference count tells. At most
    ``limit`` arrays are kept; beyond that, results are allocated as before.
    """

    #: The count of an array only the pool holds, as :meth:`take` sees it (the list, and
    #: whatever references the count itself takes on this Python version); measured once.
    idle: ClassVar[int]

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.arrays: list[np.ndarray] = []

    def _counts(self) -> list[int]:
        return [sys.getrefcount(array) for array in self.arrays]

    def take(self, size: int) -> np.ndarray:
        """An uninitialised float64 array of ``size`` values that nobody else refers to."""
        for array, count in zip(self.arrays, self._counts()):
            if array.size == size and count <= self.idle:
                return array
        array = np.empty(size)
        if len(self.arrays) < self.limit:
            self.arrays.append(array)
        return array


def _idle_count() -> int:
    """:attr:`Outputs.idle`: the count :meth:`Outputs.take` sees for a pool's only array."""
    probe = Outputs(limit=1)
    probe.arrays.append(np.empty(0))
    return probe._counts()[0]


Outputs.idle = _idle_count()


def combine(
    vectors: Sequence[np.ndarray],
    weights: np.ndarray,
    grad_size: int,
    outputs: Outputs | None = None,
) -> np.ndarray:
    """Σ_i C[u,i]·vector_i for each stream u, interleaved back into one float64 vector.

    The single-sum case of :func:`combine_sums`; ``outputs`` supplies the result array.
    """
    return combine_sums([(vectors, weights)], grad_size, outputs=outputs)[0]


def combine_sums(
    sums: Sequence[Sum], grad_size: int, total: bool = False, outputs: Outputs | None = None
) -> list[np.ndarray]:
    """Each sum ``Σ_i C[u,i]·vector_i`` (streams interleaved) as a float64 vector, in one pass.

    Memory-bound, so it reads every vector exactly once: chunk by chunk the vectors
    (float32 packets or float64 values) are widened into a cache-resident float64 block
    and one small matrix product per sum writes its ``m`` streams, interleaved into the
    result (float64 accumulation, no gradient-sized temporaries). Unit weights (FR groups,
    uncoded, M-SGC's D1 chunks) skip the product: the widened rows are added. Complex
    weights read every vector as pairs of floats (see :class:`LinearScheme`). With
    ``total`` (real weights, ``m = 1``) the sums' sum is appended, added while each chunk
    is in cache: a decoder that keeps per-group results (pipelined FR) saves a pass per
    group. ``outputs`` supplies the result arrays (else they are allocated).
    """
    if not sums:
        raise ValueError("combine_sums needs at least one sum.")
    pairs = any(np.iscomplexobj(weights) for _, weights in sums)
    if total and (pairs or any(np.shape(weights)[0] != 1 for _, weights in sums)):
        raise ValueError("combine_sums(total=True) adds real single-stream sums only.")
    dtype = np.complex128 if pairs else np.float64
    plans = []
    for vectors, weights in sums:
        if pairs:
            vectors = [as_streams(v, 1, pairs=True)[:, 0] for v in vectors]
        weights = np.asarray(weights, dtype=dtype)
        unit = weights.shape[0] == 1 and bool(np.all(weights == 1))
        plans.append((vectors, weights, unit))
    length = plans[0][0][0].size  # stream positions (pairs: complex numbers)
    rows = sum(len(vectors) for vectors, _, _ in plans) * (2 if pairs else 1)
    chunk = max(1024, min(COMBINE_CHUNK, COMBINE_BLOCK // rows))
    streams = [weights.shape[0] for _, weights, _ in plans] + ([1] if total else [])
    results = []
    for m in streams:
        size = length * m * (2 if pairs else 1)
        flat = outputs.take(size) if outputs is not None else np.empty(size)
        results.append(flat.view(dtype).reshape(length, m))
    block = np.empty((max(len(v) for v, _, _ in plans), min(chunk, length)), dtype=dtype)
    scratch = np.empty((max(streams), block.shape[1]), dtype=dtype)
    for lo in range(0, length, chunk):
        hi = min(lo + chunk, length)
        for (vectors, weights, unit), out in zip(plans, results):
            part, into = block[: len(vectors), : hi - lo], out[lo:hi]
            if unit:  # Σ vectors: widen the first into the result, add the others
                into[:, 0] = vectors[0][lo:hi]
                for i, vector in enumerate(vectors[1:]):
                    part[i] = vector[lo:hi]
                    into[:, 0] += part[i]
                continue
            for i, vector in enumerate(vectors):
                part[i] = vector[lo:hi]
            if len(weights) == 1:
                np.matmul(weights, part, out=into.T)
            elif not pairs:
                np.matmul(part.T, weights.T, out=into)
            else:  # [m, chunk] in cache, then interleaved: a complex [chunk, K]·[K, m] is slow
                product = np.matmul(weights, part, out=scratch[: len(weights), : hi - lo])
                for u, stream in enumerate(product):
                    into[:, u] = stream
        if total:
            into = results[-1][lo:hi]
            into[:] = results[0][lo:hi]
            for out in results[1:-1]:
                into += out[lo:hi]
    return [out.reshape(-1).view(np.float64)[:grad_size] for out in results]
