"""Error types that carry one clear sentence for the user."""


class ConfigError(ValueError):
    """A configuration value is invalid; the message names it and what would be valid.

    Raised while composing and validating a run, always before Ray starts.
    """


class DecodeError(RuntimeError):
    """A gradient could not be decoded correctly (never silently applied)."""
