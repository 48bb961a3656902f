"""How a run ends from outside: Ctrl-C, a scheduler's SIGTERM, a lost Ray cluster.

:func:`handled` (around the training app) turns the first SIGINT or SIGTERM into
:class:`Interrupted`, raised wherever the main thread is (inside ``ray.wait`` too), and
gives both signals their default action back, so a second one kills at once. The
runtime's cluster watch (:mod:`gclab.runtime.watch`) ends the run the same way through
:func:`lose`, which raises :class:`ClusterLost` in the main thread. Neither is a bug nor
bad input: the run turns it into one sentence that names its last checkpoint and the
command that resumes it (:mod:`gclab.app`), and the process exits with
:attr:`Stop.code`, without a traceback (:func:`gclab.cli.run_app`).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: Exit code of a run whose Ray cluster went away.
CLUSTER_LOST = 3

#: The signal by which the cluster watch reaches the main thread.
LOST_SIGNAL = signal.SIGUSR1

#: Signals that stop a run, and the exit code of each (128 + the signal's number).
STOPPING = {signal.SIGINT: 130, signal.SIGTERM: 143}

_reasons: list[str] = []  # why the cluster is lost, for the main thread's exception
_raised: list[Stop] = []  # the stop raised in this process (one at most)
_active = threading.Event()  # set while handled() is in force


class Stop(BaseException):
    """A run ended from outside: ``reason`` says by what, ``code`` is the exit code.

    A BaseException, like KeyboardInterrupt: no ``except Exception`` on the way out
    mistakes it for a failure of the run.
    """

    def __init__(self, reason: str, code: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code

    #: Whether the process exits without its exit handlers (Ray's shutdown among them).
    abandon = False


class Interrupted(Stop):
    """SIGINT (Ctrl-C) or SIGTERM."""


class ClusterLost(Stop):
    """The Ray cluster went away (:mod:`gclab.runtime.watch`): Ray's shutdown at exit
    would wait for it, so the process skips it."""

    abandon = True


@contextmanager
def handled() -> Iterator[None]:
    """Within it, SIGINT and SIGTERM raise :class:`Interrupted` once, :func:`lose` works."""
    kinds = [*STOPPING, LOST_SIGNAL]
    before = {s: signal.getsignal(s) for s in kinds}
    for s in kinds:
        signal.signal(s, _on_signal)
    _active.set()
    try:
        yield
    finally:
        _active.clear()
        if not _raised:  # after a stop a second signal kills, at exit too
            for s, handler in before.items():
                signal.signal(s, handler)


def reclaim() -> None:
    """Take SIGINT and SIGTERM back after Ray connected (its core installs a SIGTERM
    handler that aborts the process); nothing to do outside :func:`handled`."""
    if active():
        for s in STOPPING:
            signal.signal(s, _on_signal)


def active() -> bool:
    """Whether :func:`handled` is in force (else :func:`lose` would kill the process)."""
    return _active.is_set()


def lose(reason: str) -> None:
    """From any thread: raise :class:`ClusterLost` with ``reason`` in the main thread."""
    _reasons.append(reason)
    signal.pthread_kill(threading.main_thread().ident, LOST_SIGNAL)


def stop_of(exc: BaseException) -> Stop | None:
    """The stop behind ``exc``: itself, or the one raised before it.

    A handler that raises while Ray's C++ code runs in the main thread can surface as
    Ray's own error (``SystemError: ... returned a result with an exception set``);
    after a stop, any error is taken as its consequence.
    """
    if isinstance(exc, Stop):
        return exc
    return _raised[-1] if _raised else None


def _on_signal(signum: int, frame: object) -> None:
    """The first stop: later SIGINT/SIGTERM kill at once, a later loss is ignored."""
    for s in STOPPING:
        signal.signal(s, signal.SIG_DFL)
    signal.signal(LOST_SIGNAL, signal.SIG_IGN)
    if signum == LOST_SIGNAL:
        stop: Stop = ClusterLost(_reasons[-1], CLUSTER_LOST)
    else:
        stop = Interrupted(f"interrupted by {signal.Signals(signum).name}", STOPPING[signum])
    _raised.append(stop)
    raise stop
