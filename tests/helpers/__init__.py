"""Helpers shared by test modules, imported as ``helpers`` (pytest puts tests/ on the path)."""
