"""Parameter checks shared by the schemes: one ConfigError sentence per failure.

Every message names the bad value, the constraint that failed and nearby valid values,
so a user fixing ``scheme.s=...`` on the command line knows what to type next. A
message starts with the bare parameter (``s=5 needs ...``), named as the ConfigError's
``param``: the config layer qualifies it with the node's key (:mod:`gclab.errors`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from gclab.errors import ConfigError


def _values(valid: Iterable[int]) -> str:
    """``0, 1, 3, 7`` for short lists, ``0..63`` for long contiguous runs."""
    values = list(valid)
    if not values:
        return "none"
    if len(values) > 8 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}..{values[-1]}"
    shown = ", ".join(str(v) for v in values[:12])
    return shown + (", ..." if len(values) > 12 else "")


def integer(name: str, value: object) -> int:
    """``value`` as an int, or a ConfigError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{name}={value!r} is invalid: it must be an integer.", param=name)
    return int(value)


def count(name: str, value: object) -> int:
    """``value`` as an int ``>= 1`` (a number of workers), or a ConfigError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{name}={value!r} is invalid: it must be an integer >= 1.", param=name)
    return int(value)


def require(
    ok: bool, bad: str, constraint: str, context: str, label: str, valid: Iterable[int]
) -> None:
    """Raise ``"<bad> needs <constraint> but <context>; valid <label>: <valid>."`` unless ok.

    ``bad`` names the parameters (``s=5``, or ``s=2, m=3``): the first is the param, the
    others its ``also``.
    """
    if not ok:
        listed = _values(valid)
        first, *others = [part.split("=", 1)[0] for part in bad.split(", ")]
        raise ConfigError(
            f"{bad} needs {constraint} but {context}; valid {label}: {listed}.",
            param=first,
            also=tuple(others),
        )


def stragglers(n: int, s: object) -> int:
    """``scheme.s`` checked as an integer with ``0 <= s < n``."""
    s = integer("s", s)
    require(0 <= s < n, f"s={s}", "0 <= s < n", f"n={n}", f"s for n={n}", range(n))
    return s


def fr_stragglers(n: int, s: object) -> int:
    """``scheme.s`` for fractional repetition: ``0 <= s < n`` and ``(s+1) | n``."""
    s = stragglers(n, s)
    divisors = [v for v in range(n) if n % (v + 1) == 0]
    require(n % (s + 1) == 0, f"s={s}", "(s+1) | n", f"n={n}", f"s for n={n}", divisors)
    return s


def delay(T: object) -> int:
    """``scheme.T`` (decoding delay in rounds) checked as an integer ``>= 0``."""
    T = integer("T", T)
    require(T >= 0, f"T={T}", "T >= 0", "T is a delay in rounds", "T", range(4))
    return T


def divisor(name: str, value: object, total: int, of: str, context: str, label: str) -> int:
    """``value`` checked as an integer ``>= 1`` that divides ``total``, the value of ``of``.

    ``context`` states ``total`` (``n=8``, or ``n/g=4 (n=8, g=2)``), ``label`` what the
    valid values are for (``c for n=8``).
    """
    value = count(name, value)
    valid = [d for d in range(1, total + 1) if total % d == 0]
    require(total % value == 0, f"{name}={value}", f"{name} | {of}", context, label, valid)
    return value
