"""One owner per run directory: an exclusive lock held while a process writes into it.

The lock is ``flock`` on ``<directory>/.lock``. The OS releases it when its process
ends, however it ends, so a lock left by a dead process is simply taken by the next
one. While held, the file names its holder (``pid host``) for the sentence that refuses
the next process; a holder that ends normally empties it, one that died leaves its own
name there until the next owner writes over it.

:func:`take` locks, runs the caller's check under the lock, then signs the file. Within
a process the lock is re-entrant (a single run is locked by the Hydra callback before
Hydra writes, and again by :func:`gclab.app.run`); each :func:`take` is matched by a
:func:`release`, or by the end of :func:`released` around the whole process.

A refusal leaves the lock file as the process found it: absent if it made the file
(with the folders it made, where nothing else was written into them), else with the
text it had. A refusal is the check raising, a :class:`ConfigError` out of
:func:`held`'s body, or the process ending with exit code :data:`~gclab.errors.REFUSED`
inside :func:`released` (bad input found once the Hydra callback held the directory).
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from gclab.errors import REFUSED, ConfigError

#: The lock file, in the directory it guards.
LOCK_FILE = ".lock"

#: Seconds a refused process waits for a new holder to sign the file.
SIGN_WAIT = 2.0


@dataclass
class _Holding:
    """A directory this process holds, and what a refusal restores."""

    handle: TextIO
    #: Times taken and not released.
    taken: int
    #: The lock file's text when this process locked it; ``None``: the process made it.
    before: str | None
    #: The folders the process made to hold the file, innermost first.
    made: list[Path]


#: Directories this process holds (resolved paths).
_held: dict[Path, _Holding] = {}


class DirectoryInUse(ConfigError):
    """Another process holds the directory's lock."""


def take(directory: Path, what: str, check: Callable[[], None] = lambda: None) -> None:
    """Lock ``directory`` for this process, run ``check`` under the lock, then sign it.

    ``what`` names the directory in the refusal (``hydra.run.dir=...``). Raises
    :class:`DirectoryInUse` when another process holds the lock; whatever ``check``
    raises is raised after the lock is let go as a refusal.
    """
    key = directory.resolve()
    if key in _held:
        check()
        _held[key].taken += 1
        return
    made = [path for path in (key, *key.parents) if not path.exists()]
    fresh = not (key / LOCK_FILE).exists()
    key.mkdir(parents=True, exist_ok=True)
    handle = _locked(key / LOCK_FILE, what)
    handle.seek(0)
    holding = _Holding(handle, 1, None if fresh else handle.read(), made)
    try:
        check()
    except BaseException:
        _let_go(key, holding, refused=True)
        raise
    handle.truncate(0)
    handle.write(f"{os.getpid()} {socket.gethostname()}\n")
    handle.flush()
    _held[key] = holding


def release(directory: Path, refused: bool = False) -> None:
    """Undo one :func:`take`; the last one lets the lock go (as a refusal if ``refused``)."""
    key = directory.resolve()
    holding = _held[key]
    holding.taken -= 1
    if not holding.taken:
        _let_go(key, _held.pop(key), refused)


@contextmanager
def held(directory: Path, what: str, check: Callable[[], None] = lambda: None) -> Iterator[None]:
    """:func:`take` around the body and :func:`release` after it; a :class:`ConfigError`
    out of the body is a refusal."""
    take(directory, what, check)
    refused = False
    try:
        yield
    except ConfigError:
        refused = True
        raise
    finally:
        release(directory, refused)


@contextmanager
def released() -> Iterator[None]:
    """Around a process's work: every lock still held when the body ends is let go,
    however it ends; an exit with code :data:`~gclab.errors.REFUSED` is a refusal.

    The Hydra callback's lock of a single run is released by the callback after the
    task function returns or raises an exception, but a task function that ends the
    process (``sys.exit``: :func:`gclab.cli.fail`, a stop from outside) skips it.
    """
    refused = False
    try:
        yield
    except SystemExit as exc:
        refused = exc.code == REFUSED
        raise
    finally:
        for key in list(_held):
            _let_go(key, _held.pop(key), refused)


def _locked(path: Path, what: str) -> TextIO:
    """``path`` opened and locked; :class:`DirectoryInUse` when another process holds it.

    A holder that refused removes the file it made; one locked through the removed file
    would hold nothing, so the lock is taken again on the file now at ``path``.
    """
    while True:
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115  (held until released)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise DirectoryInUse(
                f"{what} is in use by another gclab process ({_holder(path)}); "
                "wait for it to end or choose another directory."
            ) from None
        try:
            if os.path.samestat(os.fstat(handle.fileno()), os.stat(path)):
                return handle
        except FileNotFoundError:
            pass
        handle.close()


def _let_go(key: Path, holding: _Holding, refused: bool) -> None:
    """Unlock ``key``: a refusal restores the lock file as it was found, else it is emptied."""
    handle = holding.handle
    if refused and holding.before is None:
        (key / LOCK_FILE).unlink()
        for path in holding.made:
            try:
                path.rmdir()
            except OSError:  # it holds what was written since (error.txt, Hydra's record)
                break
    else:
        handle.truncate(0)
        handle.write(holding.before if refused else "")
        handle.flush()
    handle.close()  # closing the file releases the lock


def _holder(path: Path) -> str:
    """``pid 123 on host h``: who signed the lock file.

    A new holder signs once its check passed, so the name of a holder that died may
    still be there for a moment: the signature of a live process is awaited.
    """
    deadline = time.monotonic() + SIGN_WAIT
    while True:
        words = path.read_text(encoding="utf-8").split()
        if len(words) == 2 and words[0].isdigit() and _alive(int(words[0]), words[1]):
            return f"pid {words[0]} on host {words[1]}"
        if time.monotonic() >= deadline:
            return "its holder has not signed the lock file yet"
        time.sleep(0.05)


def _alive(pid: int, host: str) -> bool:
    """Whether ``pid`` on ``host`` may still run (another host's: assumed so)."""
    return host != socket.gethostname() or pid_alive(pid)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs: one that exists and is not a zombie (a
    zombie has exited; only its parent's wait is missing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:  # it ended since, or no /proc (not Linux): existing is all that is known
        return not Path("/proc").is_dir()
