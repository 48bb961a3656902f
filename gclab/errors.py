"""Error types that carry one clear sentence for the user."""


class ConfigError(ValueError):
    """A configuration value is invalid; the message names it and what would be valid.

    Raised while composing and validating a run, before Ray starts; the only ones raised
    later still come before the first round (a cluster that cannot host the workers).
    """


class DecodeError(RuntimeError):
    """A gradient could not be decoded correctly (never silently applied)."""
