"""The layout rules of issue 18, checked on the source tree.

The public API is compared with the snapshot taken before the layout moved
(``tests/fixtures/api_snapshot.json``, made by ``tests/api_surface.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

from api_surface import surface

TESTS = Path(__file__).parent


def test_the_public_api_matches_the_snapshot() -> None:
    snapshot = json.loads((TESTS / "fixtures" / "api_snapshot.json").read_text())
    assert surface() == snapshot
