"""The scheme contract: the one interface every gradient-coding scheme implements.

A scheme is a plain Python object (numpy only: no Ray, no torch) so that the Ray
runtime and the simulator drive exactly the same code. To add a scheme, subclass
:class:`Scheme` (or :class:`~gclab.coding.linear.LinearScheme` for a static code with
one job per round), set ``name`` and state the parameters once, in ``__init__``'s
signature (``n`` first): the class registers itself (:data:`SCHEMES`) and the config
layer derives its Hydra schema from the signature; add a ``scheme/<name>.yaml`` option
(docs/adding-a-scheme.md, for both kinds: ``T = 0`` and ``T > 0``).

Vocabulary (docs/design.md, "Notation" and "The scheme contract"):

* ``n`` logical workers, ``k`` data shards (``k = n`` for every built-in scheme).
* A *job* is one SGD step on a global batch; job ``t`` starts in round ``t`` and is due
  by the end of round ``t + T``.
* A job's batch is split into *parts*: a part is a slice of the samples the job draws
  from one shard (:class:`Part`). The partial gradient of a part is the *sum* of its
  per-sample gradients, so the sum over all parts of a job is the batch gradient.
* A *task* ``(job, part)`` is one partial gradient a worker computes in a round.
* Each worker sends one *packet* per round (:class:`Encoder`); the master feeds the
  packets that arrive to a :class:`Decoder`, which says which jobs are decodable and
  decodes them.

A round, as both engines drive it (docs/design.md, "Time and network model"): the engine
calls :meth:`Decoder.begin_round` for every round in order, then asks whether the round
runs (:meth:`Decoder.serves`), plans it (:meth:`Decoder.plan`; the runtime only), delivers
the packets that arrive (:meth:`Decoder.receive_many`, :meth:`Decoder.receive`), pursues
:meth:`Decoder.wanted` packets for a due job that is not decodable, and decodes
:meth:`Decoder.decodable` jobs before the next round begins.

A minimal scheme, uncoded (worker ``w`` computes shard ``w`` of job ``r`` in round ``r``
and sends it; job ``r`` decodes when all ``n`` packets of round ``r`` are in)::

    import numpy as np

    from gclab.coding.contract import Decoder, Encoder, Part, Scheme, Task
    from gclab.errors import DecodeError


    class Plain(Scheme):
        name = "plain"

        def __init__(self, n: int) -> None:
            self.n, self.s, self.T = n, 0, 0
            self.parts = tuple(Part(w) for w in range(n))
            self.placement = tuple((w,) for w in range(n))

        @property
        def load(self) -> float:
            return 1 / self.n

        def tolerates(self, erasures):
            return not np.asarray(erasures, dtype=bool).any()

        def encoder(self, worker):
            return PlainEncoder()

        def decoder(self, grad_size=None):
            return PlainDecoder(self, grad_size)


    class PlainEncoder(Encoder):
        def encode(self, round, partials):
            return next(iter(partials.values()))


    class PlainDecoder(Decoder):
        def __init__(self, scheme, grad_size):
            super().__init__(scheme, grad_size)
            self.got, self.done = {}, set()

        def plan(self, round):
            return tuple((Task(round, w),) for w in range(self.scheme.n))

        def receive(self, round, worker, packet):
            if round not in self.done:
                self.got.setdefault(round, {}).setdefault(worker, packet)

        def decodable(self):
            return sorted(r for r, got in self.got.items() if len(got) == self.scheme.n)

        def decode(self, job):
            if job not in self.decodable():
                raise DecodeError(f"job {job} is not decodable.")
            got = self.got.pop(job)
            self.done.add(job)
            if self.symbolic:
                return None
            return np.sum([got[w] for w in range(self.scheme.n)], axis=0, dtype=np.float64)

        def wanted(self, job):
            have = self.got.get(job, {})
            return [] if job in self.done else [(job, w) for w in range(self.scheme.n)
                                       if w not in have]

        def serves(self, round, jobs):
            return round < jobs and round not in self.done

It is a complete scheme: ``tests/coding/test_contract.py`` runs this example through
the simulator and decodes real packets with it. With ``T = 0`` and a static plan the round hook
keeps its default; a scheme whose packets serve later jobs (``T > 0``) and whose plans
depend on what arrived overrides :meth:`Decoder.begin_round` (docs/adding-a-scheme.md).
:mod:`gclab.coding.uncoded` is this scheme on :class:`~gclab.coding.linear.LinearScheme`,
with cached decoding weights, residual checks and partial recovery.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from gclab.coding import params
from gclab.coding.numerics import Outputs


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
        """Turn this round's partial gradients (one per planned task) into one packet.

        The partials are read-only: workers that share an actor get the same array for a
        task they both plan (:mod:`gclab.runtime.tasks`).
        """

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
        decoded or is still waiting for, plans it fixed; numpy arrays and plain values.

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

    def begin_round(self, round: int) -> None:  # noqa: B027 (a hook; the default does nothing)
        """The round hook: ``round`` begins; nothing of it has been asked or delivered yet.

        Both engines call it at the start of every round, in order, rounds they skip
        included (:meth:`serves` says which run), before anything else of the round: the
        simulator (:func:`gclab.sim.engine.simulate`, :func:`gclab.adapt.simulate.simulate`),
        the training loop (:func:`gclab.runtime.server.train`) and the study's replay.
        A call that skips rounds (a fresh decoder mid-run, a replay of the rounds that
        ran) begins every earlier round not begun yet. A decoder whose plan of a round depends
        on what arrived before it (SR-SGC, M-SGC) fixes the plan here; static plans keep
        this default, which does nothing.
        """

    @abstractmethod
    def plan(self, round: int) -> Plan:
        """The tasks of every worker in ``round``, a round that has begun (static, or
        fixed by :meth:`begin_round` from earlier arrivals)."""

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
        """Return job's gradient sum (``None`` in symbolic mode) and forget it.

        The sum has the packets' dtype: float32 packets give a float32 sum, accumulated
        in float64 and rounded once (:func:`gclab.coding.sums.combine`).

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

        Engines ask it once ``round`` has begun (:meth:`begin_round`), skip a round that
        serves no such job (after the last job starts, a round may have nothing left to
        do) and end the run when every job is decoded.
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
        params.count("n", n)


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
