"""The ``tempomem`` command line: tables for people, ``--json`` for machines.

Every command takes the store from ``--store PATH`` or ``TEMPOMEM_STORE``. A user error prints
one line on stderr and exits with status 1; usage errors exit with status 2.

Each command module registers its commands on :data:`cli` when imported here.
"""

from . import analytics, demo, facts, loading, sequenced
from .base import cli, main

__all__ = ["analytics", "cli", "demo", "facts", "loading", "main", "sequenced"]
