"""Gradient-coding schemes (pure numpy); importing the package defines and registers them."""

from gclab.coding import cce, classic, pipelined, sgc, uncoded  # noqa: F401
from gclab.coding.base import Decoder, Encoder, LinearScheme, Part, Plan, Scheme, Task

__all__ = ["Decoder", "Encoder", "LinearScheme", "Part", "Plan", "Scheme", "Task"]
