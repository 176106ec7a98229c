"""JSON value predicates shared by every layer that reads metadata documents.

``True`` is a JSON boolean, never the integer 1: Python's ``bool`` subclasses ``int``,
so each check excludes it explicitly.
"""

from __future__ import annotations

from typing import Any


def is_int(value: Any) -> bool:
    """A JSON integer: an ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)
