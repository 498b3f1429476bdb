"""The ``trusted=`` policy of the query forms: which sources, and how confident, a fact must be.

A policy is ``None`` (every fact), a source name, a list of source names, or a dict
``{"sources": [...], "min_confidence": 0.9}`` where either key may be left out. A fact meets
it when its ``source`` is one of the sources (if given) and its ``confidence`` is at least the
minimum (if given). Data only, no callables: a policy can be written in JSON or on a CLI.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .errors import TempomemError


def trust_filters(trusted: Any) -> dict[str, Any]:
    """The policy as the key filters ``trusted_sources`` and ``trusted_min_confidence``.

    >>> trust_filters({"sources": ["tool_verified"], "min_confidence": 0.9})
    {'trusted_sources': ['tool_verified'], 'trusted_min_confidence': 0.9}
    """
    if trusted is None:
        return {"trusted_sources": None, "trusted_min_confidence": None}
    if isinstance(trusted, str):
        trusted = {"sources": [trusted]}
    elif isinstance(trusted, Sequence):
        trusted = {"sources": list(trusted)}
    if not isinstance(trusted, dict):
        raise TempomemError(f"trusted: expected a source, a list of sources or a dict, got {type(trusted).__name__}")
    unknown = set(trusted) - {"sources", "min_confidence"}
    if unknown:
        raise TempomemError(f"trusted: unknown key {sorted(unknown)[0]!r}; use 'sources' and 'min_confidence'")
    sources = trusted.get("sources")
    if sources is not None:
        sources = [sources] if isinstance(sources, str) else list(sources)
        if not sources or not all(isinstance(s, str) for s in sources):
            raise TempomemError(f"trusted: sources must be a non-empty list of names, got {trusted['sources']!r}")
    minimum = trusted.get("min_confidence")
    if minimum is not None:
        if isinstance(minimum, bool) or not isinstance(minimum, int | float) or math.isnan(minimum):
            raise TempomemError(f"trusted: min_confidence must be a number, got {minimum!r}")
        minimum = float(minimum)
    return {"trusted_sources": sources, "trusted_min_confidence": minimum}
