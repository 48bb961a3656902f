"""The worker actors of a run, and what the server does when they fail.

A round's packets come back through ``ray.wait`` (:class:`PendingRound`: all at once for
the virtual clock, actor by actor for the wall clock). An actor that died (Ray restarts
it), that is still busy ``timeout`` seconds after the first actor answered (it is
killed and restarted, so its backlog cannot delay the next round), or a packet with
non-finite values: all become *failed* packets, which the round protocol treats as
lost. If the due job needs one, recovery asks :meth:`WorkerPool.refetch`, which has
the (restarted) worker compute it again.

A stateful encoder (T > 0) restarts empty, so the packets of its first T rounds after
a restart mix fewer jobs than the decoder expects: they are failed too, and cannot be
recomputed. The server never decodes from a packet it cannot vouch for.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

import numpy as np
import ray
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

from gclab.coding.base import Plan
from gclab.network.protocol import RecoveryError
from gclab.runtime.placement import Placement
from gclab.runtime.worker import WorkerReport, WorkerSpec, start_hosts

log = logging.getLogger(__name__)


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
        try:
            placement.wait()
            self.hosts = start_hosts(spec, groups, shard_refs, placement, name)
            #: The Ray nodes hosting the actors (their bundles', or where they started).
            self.nodes = placement.nodes() or _started_on(self.hosts)
        except BaseException:
            placement.remove()  # frees the reservation and ends the actors in it
            raise
        self.host_of = {w: i for i, group in enumerate(groups) for w in group}
        self.T = spec.scheme.T
        self.n = spec.scheme.n
        self.timeout = timeout
        #: Packets of rounds <= unusable_until[w] are failed (fresh encoder after restart).
        self.unusable_until = np.full(self.n, -1)
        self.failures = 0
        self.nonfinite = 0
        self.restarting: set[int] = set()

    def submit(self, r: int, state_ref: ray.ObjectRef, tasks: Plan) -> PendingRound:
        """Send round ``r`` to every actor; its results come back through the returned object."""
        self._await_restarts()
        return PendingRound(self, r, state_ref, tasks)

    def _await_restarts(self) -> None:
        """Let restarted actors finish ``__init__`` so they rejoin at the next round.

        Without this, calls sent while Ray is still restarting an actor fail at once and
        one failure would erase several rounds. The wait is wall time, not virtual time.
        """
        deadline = time.monotonic() + self.timeout
        for i in sorted(self.restarting):
            while True:  # calls fail fast while Ray is still restarting the actor
                try:
                    left = max(0.1, deadline - time.monotonic())
                    ray.get(self.hosts[i].ready.remote(), timeout=left)
                    self.restarting.discard(i)
                    break
                except (RayActorError, ActorUnavailableError, GetTimeoutError) as exc:
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

    def refetch(self, r: int, w: int, state_ref: ray.ObjectRef, tasks: Plan) -> np.ndarray:
        """Recompute worker ``w``'s packet of round ``r`` (recovery of a failed packet)."""
        if self.T or self.unusable_until[w] > r:
            raise RecoveryError(
                f"round {r}: the due job needs worker {w}'s packet, which was lost with its "
                f"actor and cannot be recomputed (a T={self.T} encoder's state is gone)."
            )
        self._await_restarts()
        host = self.hosts[self.host_of[w]]
        try:
            call = host.run_round.remote(r, state_ref, {w: tasks[w]}, retry=True)
            report = ray.get(call, timeout=self.timeout)[w]
        except (RayActorError, ActorUnavailableError, GetTimeoutError) as exc:
            raise RecoveryError(
                f"round {r}: worker {w} could not recompute its packet ({type(exc).__name__})."
            ) from exc
        if not _finite(report.packet):
            raise RecoveryError(f"round {r}: worker {w} sent non-finite values again.")
        return report.packet

    def close(self) -> None:
        for h in self.hosts:
            ray.kill(h, no_restart=True)
        self.placement.remove()


class PendingRound:
    """One round's actor calls in flight, and the reports and failures they came back with.

    It is the wall clock's arrival source (:class:`gclab.network.wallclock.ArrivalSource`):
    :meth:`wait` hands over each actor's logical workers as soon as the actor answers.
    The virtual clock calls :meth:`finish` and needs them all first.
    """

    def __init__(self, pool: WorkerPool, r: int, state_ref: ray.ObjectRef, tasks: Plan) -> None:
        self.pool = pool
        self.r = r
        #: ``time.monotonic()`` when the calls went out: the round's start on the wall clock.
        self.sent = time.monotonic()
        self.calls = {
            h.run_round.remote(r, state_ref, {w: tasks[w] for w in g}): i
            for i, (h, g) in enumerate(zip(pool.hosts, pool.groups))
        }
        self.reports: dict[int, WorkerReport] = {}
        #: Packets without a valid copy (known once their actor has answered).
        self.failed = np.zeros(pool.n, dtype=bool)
        self.first: float | None = None  # when the first actor answered

    def pending(self) -> bool:
        """Whether some actor has not answered yet."""
        return bool(self.calls)

    def wait(self, timeout: float | None) -> list[tuple[int, bool]]:
        """The next actor's workers, each with whether its packet failed; ``[]`` on a timeout.

        An actor still busy ``pool.timeout`` seconds after the first answer is killed
        (Ray restarts it) and every call still out is answered as failed.
        """
        pool, r = self.pool, self.r
        stuck_at = None if self.first is None else self.first + pool.timeout
        limits = [] if timeout is None else [timeout]
        if stuck_at is not None:
            limits.append(stuck_at - time.monotonic())
        wait = max(0.0, min(limits)) if limits else None
        ready, _ = ray.wait(list(self.calls), num_returns=1, timeout=wait)
        if not ready:
            if stuck_at is None or time.monotonic() < stuck_at:
                return []
            hosts = list(self.calls.values())
            for ref, i in self.calls.items():
                log.warning("round %d: worker actor %d is stuck; restarting it", r, i)
                ray.cancel(ref, force=False)
                ray.kill(pool.hosts[i], no_restart=False)
                pool._failed_host(i, r)
            self.calls.clear()
            return self._answered(hosts)
        ref = ready[0]
        i = self.calls.pop(ref)
        self.first = self.first if self.first is not None else time.monotonic()
        try:
            got = ray.get(ref)
        except (RayActorError, ActorUnavailableError) as exc:
            log.warning("round %d: worker actor %d died (%s); Ray restarts it", r, i, exc)
            pool._failed_host(i, r)
            return self._answered([i])
        self.reports.update(got)
        for w, rep in got.items():
            if not _finite(rep.packet):
                log.warning("round %d: worker %d sent non-finite values; erasing it", r, w)
                pool.nonfinite += 1
                self.failed[w] = True
                if pool.T:  # its encoder state is poisoned too: start it afresh
                    ray.kill(pool.hosts[i], no_restart=False)
                    pool._failed_host(i, r)
        return self._answered([i])

    def _answered(self, hosts: list[int]) -> list[tuple[int, bool]]:
        """Mark the failed packets of the actors ``hosts``, which are done with this round."""
        workers = [w for i in hosts for w in self.pool.groups[i]]
        self.failed[workers] |= self.pool.unusable_until[workers] >= self.r
        return [(w, bool(self.failed[w])) for w in workers]

    def finish(self) -> tuple[dict[int, WorkerReport], np.ndarray]:
        """Wait for every actor; the reports and the mask of failed packets."""
        while self.calls:
            self.wait(None)
        return self.reports, self.failed


def _started_on(hosts: list) -> list[str]:
    """The node of each actor that answers; one restarting just now is left out."""
    nodes = []
    for ref in [h.node.remote() for h in hosts]:
        try:
            nodes.append(ray.get(ref))
        except (RayActorError, ActorUnavailableError):
            continue
    return nodes


def _finite(packet: np.ndarray) -> bool:
    """One float64-accumulated pass: NaN or Inf anywhere makes the sum non-finite."""
    return math.isfinite(float(packet.sum(dtype=np.float64)))
