"""Error types that carry one clear sentence for the user."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class ConfigError(ValueError):
    """A configuration value is invalid; the message names it and what would be valid.

    Raised while composing and validating a run, before Ray starts; the only ones raised
    later still come before the first round (a cluster that cannot host the workers).

    Domain code knows its parameters, not where the config puts them: it names the
    parameter its sentence starts with as ``param`` (``ConfigError("s=5 needs s < n=4;
    ...", param="s")``), and the config layer qualifies it with the node's path
    (:func:`under`, :func:`gclab.schemas.instantiate_checked`), so that the user reads
    the key they typed, ``scheme.s=5 needs ...``. A message without ``param`` is
    shown as it is: it names its keys in full, or none.
    """

    def __init__(self, message: str, *, param: str | None = None) -> None:
        if param is not None and not message.startswith(param):
            raise ValueError(f"ConfigError param {param!r} must start its message {message!r}")
        super().__init__(message)
        #: The (dotted) parameter the message starts with, relative to the node it is read in.
        self.param = param

    def under(self, path: str) -> ConfigError:
        """This error read from ``path`` (a config node's dotted key, ``""`` for the root).

        ``p=2 is invalid`` under ``delay.loss`` reads ``delay.loss.p=2 is invalid``; an
        error without ``param`` is returned unchanged.
        """
        if self.param is None or not path:
            return self
        return ConfigError(f"{path}.{self}", param=f"{path}.{self.param}")


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
