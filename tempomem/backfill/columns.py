"""The input columns of SPEC §9, by kind: what backfill reads, requires and leaves to the store."""

REQUIRED = ("subject", "predicate", "object", "recorded_at")
STRINGS = ("fact_id", "scope", "subject", "predicate", "object", "text", "reason", "retraction_reason",
            "source", "superseded_by", "link_type", "status")
TIMES = ("valid_from", "valid_to", "recorded_at", "retracted_at", "superseded_at")
NUMBERS = ("confidence", "weight")
#: Every column backfill understands. ``status`` and ``superseded_at`` are not input columns in
#: SPEC §9 but are columns of an export (``tempomem export``); honouring them makes the round
#: trip exact. Every other column goes to ``attributes``.
INPUT_COLUMNS = (*STRINGS, *TIMES, *NUMBERS, "valid_from_inferred", "artifacts", "embedding", "attributes")
#: Columns a store manages itself: never taken from input, and not kept as attributes either
#: (an export carries them; they describe the old store, not the facts).
STORE_MANAGED = ("origin", "ingested_at", "revision", "believed_until", "__row")
BELIEF_STATUSES = ("live", "ended", "superseded", "retracted")
