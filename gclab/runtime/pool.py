"""The worker actors of a run, and what the server does when they fail.

A round's packets come back as each call's future completes (:class:`PendingRound`,
the round protocol's arrival source: all at once for the virtual clock, actor by actor
for the wall clock). Every round has an absolute
deadline, ``cluster.timeout`` seconds after its calls went out, whether or not any actor
answered: an actor still busy then is killed and restarted, so neither it nor its
backlog can hold up the run. An actor that died (Ray restarts it), a stuck one, or a
packet with non-finite values: all become *failed* packets, which the round protocol
treats as lost. If the due job needs one, recovery asks :meth:`WorkerPool.refetch`,
which has the (restarted) worker compute it again. A reply lost on its way back from
an actor that lives on (its connection broke: Ray's ``ActorUnavailableError``, seen on
lossy links) is asked for again (:meth:`WorkerPool.answer`) before its packets are
failed.

A stateful encoder (T > 0) restarts empty, so the packets of its first T rounds after
a restart mix fewer jobs than the decoder expects: they are failed too, and cannot be
recomputed. The server never decodes from a packet it cannot vouch for.

A lost cluster (its GCS gone) ends the run through :mod:`gclab.runtime.watch`.

Start-up has a deadline too, and ends the run before its first round with one sentence
that compares what the actors ask for with what the cluster had free. The actors'
resources are reserved first, all together (the run's placement group,
:mod:`gclab.runtime.placement`): a reservation that does not fit in the free resources
gets ``cluster.timeout`` seconds (others may free some), one that fits at least
:data:`STARTUP_SECONDS`. Then the actors, which fit in their reservation, get at least
:data:`STARTUP_SECONDS` to come up (a process that imports torch takes seconds, tens of
them on a loaded machine), as does an actor Ray restarts.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any, Protocol

import numpy as np
import ray
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

from gclab.coding.contract import Plan, Scheme
from gclab.errors import ConfigError
from gclab.network.rounds import RecoveryError
from gclab.runtime.placement import ADVICE, Placement, asks, count, demand
from gclab.runtime.watch import ClusterWatch
from gclab.runtime.worker import HostReport, WorkerReport, WorkerSpec, host_shards, start_hosts

#: The weights a round's jobs are computed on: job t -> the handle of round t's broadcast.
Weights = Mapping[int, Any]

log = logging.getLogger(__name__)

#: Errors of a call to an actor that died or is being restarted.
ACTOR_ERRORS = (RayActorError, ActorUnavailableError)

#: Seconds a live actor whose reply Ray lost has to send it again (in the network box
#: it came within 2 s of the error).
ASK_AGAIN_SECONDS = 10.0

#: Seconds an actor that fits in the cluster may take to come up, when cluster.timeout
#: is shorter (at start-up and after a restart).
STARTUP_SECONDS = 60.0


class Round(Protocol):
    """One round's worker calls in flight (:class:`PendingRound` is the Ray one)."""

    #: ``time.monotonic()`` when the calls went out: the round's start on the wall clock.
    sent: float
    reports: dict[int, WorkerReport]
    failed: np.ndarray

    def pending(self) -> bool: ...

    def wait(self, timeout: float | None) -> list[int]: ...

    def seconds(self, workers: np.ndarray) -> np.ndarray: ...


class Pool(Protocol):
    """What the server loop needs of its workers (:class:`WorkerPool` is the Ray one)."""

    #: The logical workers of each actor.
    groups: list[list[int]]
    #: Where the actors run (Ray node ids): the summary counts the distinct ones.
    nodes: list[str]
    #: What the actors' compute times are measured on (:func:`timing.processor`), distinct.
    processors: list[str]
    failures: int

    def broadcast(self, state: np.ndarray) -> Any:
        """Make the weights available to every worker once; the handle rounds take."""
        ...

    def submit(self, r: int, weights: Weights, tasks: Plan) -> Round:
        """Send round ``r``: ``tasks``, each of job t on ``weights[t]`` (a handle)."""
        ...

    def refetch(self, r: int, w: int, weights: Weights, tasks: Plan) -> np.ndarray: ...

    def state_dict(self) -> dict | None: ...

    def load_state_dict(self, state: dict) -> None: ...

    def switch(self, scheme: Scheme) -> None:
        """Every worker takes ``scheme``'s shards and fresh encoders (an adaptive run)."""
        ...

    def close(self) -> None: ...


class WorkerPool:
    """Starts the actors, runs their rounds, and turns their failures into erasures."""

    def __init__(
        self,
        spec: WorkerSpec,
        groups: list[list[int]],
        shard_refs: Sequence[ray.ObjectRef],
        placement: Placement,
        timeout: float,
        name: str,
    ) -> None:
        self.groups = groups
        self.shard_refs = shard_refs  # the driver owns the shards: restarted actors re-fetch
        self.placement = placement
        self.timeout = timeout
        self.startup = max(timeout, STARTUP_SECONDS)
        self.hosts: list = []
        self.watch = ClusterWatch(timeout)
        try:
            self._start(spec, name)
            #: The Ray nodes hosting the actors (their bundles', or where they started).
            self.nodes = placement.nodes() or _ask(self.hosts, "node")
            self.processors = sorted(set(_ask(self.hosts, "processor")))
        except BaseException:
            self.close()  # frees the reservation and ends the actors
            raise
        self.host_of = {w: i for i, group in enumerate(groups) for w in group}
        #: The scheme the actors hold (a restarted actor comes up with the first one).
        self.first, self.scheme = spec.scheme, spec.scheme
        self.T = spec.scheme.T
        self.n = spec.scheme.n
        #: Packets of rounds <= unusable_until[w] are failed (fresh encoder after restart).
        self.unusable_until = np.full(self.n, -1)
        self.failures = 0
        self.nonfinite = 0
        self.restarting: set[int] = set()

    def _start(self, spec: WorkerSpec, name: str) -> None:
        """Reserve, start and wait for every actor (see the module docstring); else say why.

        The reservation gets the start-up deadline; once it is granted the actors' share
        is theirs, so they fit and get ``startup`` seconds to come up.
        """
        p, actors = self.placement, len(self.groups)
        free, total = ray.available_resources(), ray.cluster_resources()
        fits = all(actors * each <= free.get(unit, 0.0) for unit, each in asks(p.cpus, p.gpus))
        limit = self.startup if fits else self.timeout
        if not p.wait(limit):
            raise ConfigError(shortfall(actors, 0, p.cpus, p.gpus, free, total, limit))
        self.hosts = start_hosts(spec, self.groups, self.shard_refs, p, name)
        calls = [h.ready.remote() for h in self.hosts]
        ready, _ = ray.wait(calls, num_returns=len(calls), timeout=self.startup)
        if len(ready) < len(calls):
            sentence = shortfall(actors, len(ready), p.cpus, p.gpus, free, total, self.startup)
            raise ConfigError(sentence)
        ray.get(ready)  # an actor whose __init__ raised reports it here

    def broadcast(self, state: np.ndarray) -> ray.ObjectRef:
        """One copy of the weights in the object store, read by every actor."""
        return ray.put(state)

    def submit(self, r: int, weights: Weights, tasks: Plan) -> PendingRound:
        """Send round ``r`` to every actor; its results come back through the returned object."""
        self._await_restarts()
        return PendingRound(self, r, weights, tasks)

    def _await_restarts(self) -> None:
        """Let restarted actors finish ``__init__`` so they rejoin at the next round.

        Without this, calls sent while Ray is still restarting an actor fail at once and
        one failure would erase several rounds. The wait is wall time, not virtual time.
        """
        deadline = time.monotonic() + self.startup
        for i in sorted(self.restarting):
            while True:  # calls fail fast while Ray is still restarting the actor
                try:
                    left = max(0.1, deadline - time.monotonic())
                    ray.get(self.hosts[i].ready.remote(), timeout=left)
                    if self.scheme is not self.first:  # it came up with the first scheme
                        ray.get(self._switch(i), timeout=left)
                    self.restarting.discard(i)
                    break
                except (*ACTOR_ERRORS, GetTimeoutError) as exc:
                    if time.monotonic() >= deadline:
                        log.warning("worker actor %d has not restarted (%s)", i, exc)
                        break
                    time.sleep(0.2)

    def _failed_host(self, i: int, r: int) -> None:
        self.restarting.add(i)
        self.failures += 1
        # the restarted actor's first round is r + 1; its packets are whole from r+1+T
        self.unusable_until[self.groups[i]] = np.maximum(
            self.unusable_until[self.groups[i]], r + self.T
        )

    def answer(self, i: int, r: int, deadline: float) -> HostReport | None:
        """Actor ``i``'s report of round ``r``, asked for again after Ray lost the reply
        (``ActorUnavailableError``: the connection to a live actor broke; the call may or
        may not have run). ``None`` when the call did not run, or when the actor does not
        answer within :data:`ASK_AGAIN_SECONDS` (by ``deadline``, ``time.monotonic()``, at
        the latest) or has died: its packet fails then, as before, and an actor Ray is
        restarting holds up the round no longer than that. A stateful encoder that ran
        the call has moved on exactly as if the reply had come, so the report keeps its
        packets whole."""
        deadline = min(deadline, time.monotonic() + ASK_AGAIN_SECONDS)
        while True:
            try:
                call = self.hosts[i].answer.remote(r)
                return ray.get(call, timeout=max(0.1, deadline - time.monotonic()))
            except ActorUnavailableError:
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.2)  # Ray is still reconnecting
            except (RayActorError, GetTimeoutError):
                return None

    def refetch(self, r: int, w: int, weights: Weights, tasks: Plan) -> np.ndarray:
        """Recompute worker ``w``'s packet of round ``r`` (recovery of a failed packet).

        The actor gets ``startup`` seconds to come back after a restart, and the call as
        long again: the first call of a new process pays its warm-up too.
        """
        if self.T or self.unusable_until[w] > r:
            raise RecoveryError(
                f"round {r}: the due job needs worker {w}'s packet, which was lost with its "
                f"actor and cannot be recomputed (a T={self.T} encoder's state is gone)."
            )
        i = self.host_of[w]
        deadline = time.monotonic() + self.startup
        while True:
            self._await_restarts()
            try:
                call = self.hosts[i].run_round.remote(r, weights, {w: tasks[w]}, retry=True)
                report = ray.get(call, timeout=max(0.1, deadline - time.monotonic()))
                break
            except (*ACTOR_ERRORS, GetTimeoutError) as exc:
                if isinstance(exc, GetTimeoutError) or time.monotonic() >= deadline:
                    raise RecoveryError(
                        f"round {r}: worker {w} could not recompute its packet within "
                        f"{self.startup:g} s ({type(exc).__name__})."
                    ) from exc
                self.restarting.add(i)  # still restarting: wait for it and call again
        if not report.finite()[0]:
            raise RecoveryError(f"round {r}: worker {w} sent non-finite values again.")
        return report.packets[0]

    def switch(self, scheme: Scheme) -> None:
        """Every actor takes ``scheme``'s shards and fresh encoders (between rounds)."""
        self._await_restarts()
        self.scheme, self.T = scheme, scheme.T
        ray.get([self._switch(i) for i in range(len(self.hosts))], timeout=self.startup)

    def _switch(self, i: int) -> ray.ObjectRef:
        shards = host_shards(self.scheme, self.groups[i])
        return self.hosts[i].switch.remote(self.scheme, {j: self.shard_refs[j] for j in shards})

    def state_dict(self) -> dict | None:
        """Every logical worker's encoder state (from its actor) and the failure records.

        Called between rounds. ``None`` when an actor does not answer within the
        timeout: the caller then skips this checkpoint (the previous one stays valid).
        """
        self._await_restarts()
        try:
            parts = ray.get([h.encoder_states.remote() for h in self.hosts], timeout=self.timeout)
        except (*ACTOR_ERRORS, GetTimeoutError) as exc:
            log.warning("encoder states not read (%s): checkpoint skipped", exc)
            return None
        return {
            "encoders": {w: state for part in parts for w, state in part.items()},
            "unusable_until": self.unusable_until.copy(),
            "failures": self.failures,
            "nonfinite": self.nonfinite,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` (a resumed run, before its first round)."""
        encoders = state["encoders"]
        calls = [
            h.load_encoder_states.remote({w: encoders[w] for w in group})
            for h, group in zip(self.hosts, self.groups)
        ]
        ray.get(calls, timeout=self.timeout)
        self.unusable_until = np.array(state["unusable_until"])
        self.failures, self.nonfinite = state["failures"], state["nonfinite"]

    def close(self) -> None:
        """End the actors and free their reservation; nothing is left to end once the
        cluster is lost (and Ray would wait for it)."""
        self.watch.stop()
        if self.watch.lost.is_set():
            return
        for h in self.hosts:
            ray.kill(h, no_restart=True)
        self.placement.remove()  # frees the reservation


def shortfall(
    actors: int,
    started: int,
    cpus: float,
    gpus: float,
    free: dict[str, float],
    total: dict[str, float],
    waited: float,
) -> str:
    """The sentence for actors that did not start within ``waited`` seconds."""
    needs, fits = [], True
    for unit, each in asks(cpus, gpus):
        have, of = free.get(unit, 0.0), total.get(unit, 0.0)
        needs.append(
            f"{demand(actors, unit, each)} while the Ray cluster had {have:g} of its "
            f"{count(of, unit)} free"
        )
        fits &= actors * each <= have
    advice = (
        "they fit, so they were slow to start (or no single node has room for one): "
        "raise cluster.timeout"
        if fits
        else ADVICE
    )
    return (
        f"{actors - started} of the {actors} worker actors did not start within {waited:g} s: "
        f"they ask for {' and '.join(needs)}; {advice}."
    )


class PendingRound:
    """One round's actor calls in flight, and the reports and failures they came back with.

    It is the round protocol's arrival source (:class:`gclab.network.clock.ArrivalSource`):
    :meth:`wait` hands over each actor's logical workers as soon as the actor's report is
    in the driver's hand. The virtual clock takes them all first, with the compute times
    the workers measured.

    Every report is fetched as soon as its actor answers, all of them at once: each
    call's result is a future (``ObjectRef.future()``, whose callback Ray runs when the
    report is local) from the start. A report too large to travel in Ray's reply (a
    packet of over 100 KB) stays in the actor's node's object store until someone asks
    for it, and ``ray.wait(..., num_returns=1)`` only asks for those already answered
    when it is called, until one of them is local: a packet finished meanwhile would
    wait for the one being fetched before its own transfer started, which on shaped
    links made rounds measurably longer than the network does (BENCHMARKS.md, issue 46).
    """

    def __init__(self, pool: WorkerPool, r: int, weights: Weights, tasks: Plan) -> None:
        self.pool = pool
        self.r = r
        #: ``time.monotonic()`` when the calls went out: the round's start on the wall clock.
        self.sent = time.monotonic()
        #: Actors still busy then are stuck: killed, restarted, their packets failed.
        self.deadline = self.sent + pool.timeout
        self.calls = {
            h.run_round.remote(r, weights, {w: tasks[w] for w in g}): i
            for i, (h, g) in enumerate(zip(pool.hosts, pool.groups))
        }
        #: ``(call, its future, when it was done)`` of each report in the driver's hand
        #: (or call that failed), in that order: Ray's callbacks put them here.
        self.back: queue.SimpleQueue[tuple[ray.ObjectRef, Future, float]] = queue.SimpleQueue()
        for ref in self.calls:
            ref.future().add_done_callback(partial(self._done, ref))
        self.reports: dict[int, WorkerReport] = {}
        #: Packets without a valid copy (known once their actor has answered).
        self.failed = np.zeros(pool.n, dtype=bool)

    def _done(self, ref: ray.ObjectRef, future: Future) -> None:
        self.back.put((ref, future, time.monotonic()))

    def pending(self) -> bool:
        """Whether some actor has not answered yet."""
        return bool(self.calls)

    def _next(self, timeout: float) -> tuple[ray.ObjectRef, Future, float] | None:
        """The next call of this round that is done, within ``timeout`` seconds (else None);
        those of actors given up on at the deadline are passed over."""
        end = time.monotonic() + timeout
        while True:
            try:
                done = self.back.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                return None
            if done[0] in self.calls:
                return done

    def wait(self, timeout: float | None) -> list[int]:
        """The next actor's workers (:attr:`failed` marks theirs); ``[]`` on a timeout.

        At the round's deadline every actor still busy is killed (Ray restarts it) and
        its calls are answered as failed.
        """
        pool, r = self.pool, self.r
        left = self.deadline - time.monotonic()
        wait = max(0.0, left if timeout is None else min(timeout, left))
        done = self._next(wait)
        if done is None:
            if time.monotonic() < self.deadline:
                return []
            hosts = list(self.calls.values())
            for ref, i in self.calls.items():
                log.warning(
                    "round %d: worker actor %d is stuck after cluster.timeout=%g s; "
                    "restarting it", r, i, pool.timeout,
                )  # fmt: skip
                ray.cancel(ref, force=False)
                ray.kill(pool.hosts[i], no_restart=False)
                pool._failed_host(i, r)
            self.calls.clear()
            return self._answered(hosts)
        ref, future, back = done
        i = self.calls.pop(ref)
        try:
            got = future.result()
        except ACTOR_ERRORS as exc:
            got = (
                pool.answer(i, r, self.deadline) if isinstance(exc, ActorUnavailableError) else None
            )
            if got is None:
                log.warning("round %d: worker actor %d failed its call (%s)", r, i, exc)
                pool._failed_host(i, r)
                return self._answered([i])
            log.warning("round %d: worker actor %d's reply was lost (%s); asked again", r, i, exc)
            back = time.monotonic()
        got.times["back"] = back  # the report in the driver's hand (fetched, deserialised)
        self.reports.update(got.reports())
        nonfinite = [w for w, finite in zip(got.workers, got.finite()) if not finite]
        for w in nonfinite:
            log.warning("round %d: worker %d sent non-finite values; erasing it", r, w)
            pool.nonfinite += 1
            self.failed[w] = True
        if nonfinite and pool.T:  # their encoder states are poisoned too: start them afresh
            ray.kill(pool.hosts[i], no_restart=False)
            pool._failed_host(i, r)
        return self._answered([i])

    def _answered(self, hosts: list[int]) -> list[int]:
        """Mark the failed packets of the actors ``hosts``, which are done with this round."""
        workers = [w for i in hosts for w in self.pool.groups[i]]
        self.failed[workers] |= self.pool.unusable_until[workers] >= self.r
        return workers

    def seconds(self, workers: np.ndarray) -> np.ndarray:
        """The compute times ``workers`` reported (0 for one that sent no report)."""
        return np.array([self.reports[w].seconds if w in self.reports else 0.0 for w in workers])


def _ask(hosts: list, method: str) -> list[str]:
    """``method()`` of each actor that answers; one restarting just now is left out."""
    answers = []
    for ref in [getattr(h, method).remote() for h in hosts]:
        try:
            answers.append(ray.get(ref))
        except (RayActorError, ActorUnavailableError):
            continue
    return answers
