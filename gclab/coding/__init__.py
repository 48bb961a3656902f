"""Gradient-coding schemes (pure numpy); importing the package defines and registers them."""

from gclab.coding import cce, classic, is_cr, is_hr, m_sgc, pipelined, sr_sgc, uncoded  # noqa: F401
from gclab.coding.contract import Decoder, Encoder, Part, Plan, Scheme, Task
from gclab.coding.linear import LinearScheme

__all__ = ["Decoder", "Encoder", "LinearScheme", "Part", "Plan", "Scheme", "Task"]
