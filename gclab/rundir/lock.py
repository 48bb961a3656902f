"""One owner per run directory: an exclusive lock held while a process writes into it.

The lock is ``flock`` on ``<directory>/.lock``. The OS releases it when its process
ends, however it ends, so a lock left by a dead process is simply taken by the next
one. While held, the file names its holder (``pid host``) for the sentence that refuses
the next process; a holder that ends normally empties it, one that died leaves its own
name there until the next owner writes over it.

:func:`take` locks, runs the caller's check under the lock (a refusal releases it and
leaves the directory as it was: a lock file or folders it made are removed), then signs
the file. Within a process the lock is re-entrant (a
single run is locked by the Hydra callback before Hydra writes, and again by
:func:`gclab.app.run`); each :func:`take` is matched by a :func:`release`.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

from gclab.errors import ConfigError

#: The lock file, in the directory it guards.
LOCK_FILE = ".lock"

#: Seconds a refused process waits for a new holder to sign the file.
SIGN_WAIT = 2.0

#: Directories this process holds -> [open lock file, times taken].
_held: dict[Path, list] = {}


class DirectoryInUse(ConfigError):
    """Another process holds the directory's lock."""


def take(directory: Path, what: str, check: Callable[[], None] = lambda: None) -> None:
    """Lock ``directory`` for this process, run ``check`` under the lock, then sign it.

    ``what`` names the directory in the refusal (``hydra.run.dir=...``). Raises
    :class:`DirectoryInUse` when another process holds the lock; whatever ``check``
    raises is raised after the lock is released, with the lock file unchanged.
    """
    key = directory.resolve()
    if key in _held:
        check()
        _held[key][1] += 1
        return
    made = [path for path in (key, *key.parents) if not path.exists()]  # what a refusal undoes
    fresh = not (key / LOCK_FILE).exists()
    key.mkdir(parents=True, exist_ok=True)
    handle = open(key / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115  (held until release)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise DirectoryInUse(
            f"{what} is in use by another gclab process ({_holder(key / LOCK_FILE)}); "
            "wait for it to end or choose another directory."
        ) from None
    try:
        check()
    except BaseException:
        if fresh:  # a refused run leaves the directory as it found it
            (key / LOCK_FILE).unlink()
            for path in made:
                path.rmdir()
        handle.close()  # closing the file releases the lock
        raise
    handle.truncate(0)
    handle.write(f"{os.getpid()} {socket.gethostname()}\n")
    handle.flush()
    _held[key] = [handle, 1]


def release(directory: Path) -> None:
    """Undo one :func:`take`; the last one empties the lock file and unlocks it."""
    key = directory.resolve()
    entry = _held[key]
    entry[1] -= 1
    if entry[1]:
        return
    del _held[key]
    handle = entry[0]
    handle.truncate(0)
    handle.close()


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
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
