"""Error types that carry one clear sentence for the user."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

#: Exit code of a process that refuses bad input (one sentence on stderr,
#: :func:`gclab.cli.fail`).
REFUSED = 2


class ConfigError(ValueError):
    """A configuration value is invalid; the message names it and what would be valid.

    Raised while composing and validating a run, before Ray starts; the only ones raised
    later still come before the first round (a cluster that cannot host the workers).

    Domain code knows its parameters, not where the config puts them: it names the
    parameter its sentence starts with as ``param`` (``ConfigError("s=5 needs s < n=4;
    ...", param="s")``), and any other it names as ``<name>=`` in ``also``; the config
    layer qualifies them with the node's path (:func:`under`,
    :func:`gclab.schemas.instantiate_checked`), so that the user reads the keys they
    typed, ``scheme.s=2, scheme.m=3 needs ...``. A message without ``param`` is shown as
    it is: it names its keys in full, or none.
    """

    def __init__(
        self, message: str, *, param: str | None = None, also: tuple[str, ...] = ()
    ) -> None:
        if param is not None and not message.startswith(param):
            raise ValueError(f"ConfigError param {param!r} must start its message {message!r}")
        missing = [name for name in also if _named(name).search(message) is None]
        if missing or (also and param is None):
            raise ValueError(f"ConfigError also={also!r}: each must be named in {message!r}")
        super().__init__(message)
        #: The (dotted) parameter the message starts with, relative to the node it is read in.
        self.param = param
        #: The other parameters the message names (``<name>=``), relative to the same node.
        self.also = also

    def under(self, path: str) -> ConfigError:
        """This error read from ``path`` (a config node's dotted key, ``""`` for the root).

        ``p=2 is invalid`` under ``delay.loss`` reads ``delay.loss.p=2 is invalid``; an
        error without ``param`` is returned unchanged.
        """
        if self.param is None or not path:
            return self
        message = f"{path}.{self}"
        start = len(path) + 1 + len(self.param)
        for name in self.also:  # the first ``name=`` after the sentence's first parameter
            found = _named(name).search(message, start)
            assert found is not None  # checked when the error was made
            message = f"{message[: found.start()]}{path}.{message[found.start() :]}"
        also = tuple(f"{path}.{name}" for name in self.also)
        return ConfigError(message, param=f"{path}.{self.param}", also=also)


def _named(name: str) -> re.Pattern[str]:
    """``name=`` as a whole key: not the tail of another key (``xs=``, ``a.s=``)."""
    return re.compile(rf"(?<![\w.]){re.escape(name)}=")


@contextmanager
def under(path: str) -> Iterator[None]:
    """Re-raise a ConfigError raised inside as read from ``path`` (:meth:`ConfigError.under`)."""
    try:
        yield
    except ConfigError as exc:
        qualified = exc.under(path)
        if qualified is exc:
            raise
        raise qualified from None


class DecodeError(RuntimeError):
    """A gradient could not be decoded correctly (never silently applied)."""


class DivergedError(RuntimeError):
    """Training diverged: the weights hold non-finite values (the run stops, naming when)."""
