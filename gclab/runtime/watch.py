"""Watching the Ray cluster, so that a run whose cluster went away ends within cluster.timeout.

Without it, a driver whose cluster's head stopped waits in Ray until Ray's own GCS
reconnection timeout (60 s) kills it with a line from Ray's C++ core. A daemon thread
connects to the cluster's GCS (plain TCP) every :attr:`ClusterWatch.period` seconds;
once it has not accepted a connection for :attr:`ClusterWatch.grace` seconds, the
cluster counts as lost: the watch raises :class:`gclab.rundir.interrupts.ClusterLost` in the
main thread (:func:`gclab.rundir.interrupts.lose`) and the pool no longer calls into Ray
(:attr:`ClusterWatch.lost`). Period and grace are fractions of ``cluster.timeout``
(at most 2 s and 10 s), so detection takes less than ``cluster.timeout``.

The watch runs only where :func:`gclab.rundir.interrupts.handled` is in force (the training
app's process): elsewhere, in a test or in a Ray task of the sweep launcher, the
signal would find no handler.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import ray

from gclab.rundir import interrupts

log = logging.getLogger(__name__)


class ClusterWatch:
    """Probes the GCS of the Ray cluster this process is connected to, until stopped."""

    def __init__(self, timeout: float) -> None:
        host, _, port = ray.get_runtime_context().gcs_address.rpartition(":")
        self.target = (host, int(port))
        #: Seconds between probes (and each probe's own timeout).
        self.period = min(2.0, timeout / 5)
        #: Seconds without an answer after which the cluster is lost.
        self.grace = min(10.0, timeout / 2)
        #: Set once the cluster is lost: nothing more is asked of Ray.
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="gclab-cluster-watch", daemon=True)
        if interrupts.active():
            self._thread.start()

    def _watch(self) -> None:
        answered = time.monotonic()
        while not self._stop.wait(self.period):
            try:
                with socket.create_connection(self.target, timeout=self.period):
                    answered = time.monotonic()
            except OSError as exc:
                silent = time.monotonic() - answered
                if silent < self.grace:
                    continue
                address = f"{self.target[0]}:{self.target[1]}"
                log.warning("the Ray cluster's GCS at %s is gone (%s)", address, exc)
                self.lost.set()
                interrupts.lose(
                    f"lost the Ray cluster (its GCS at {address} has not answered for "
                    f"{silent:.0f} s: {type(exc).__name__}; a resume may name another "
                    "cluster.address)"
                )
                return

    def stop(self) -> None:
        """End the probes (the run is over)."""
        self._stop.set()
