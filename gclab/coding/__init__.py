"""Gradient-coding schemes (pure numpy). Importing this package registers them all."""

from gclab.coding import cce, classic, pipelined, sgc, uncoded  # noqa: F401
from gclab.coding.base import Decoder, Encoder, LinearScheme, Part, Plan, Scheme, Task

__all__ = ["Decoder", "Encoder", "LinearScheme", "Part", "Plan", "Scheme", "Task"]
