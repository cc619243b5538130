"""Names every stage agrees on: the archive format and schema version, run statuses, the cell key."""

from __future__ import annotations

import re

SCHEMA_VERSION = 1
FORMAT = "toolkit-run-archive"
STATUSES = ("complete", "partial", "failed")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """A name as it may appear in a path: runs of other characters than [A-Za-z0-9._-] become `_`."""
    return _SAFE.sub("_", text)


def cell_key(arm: str, domain: str, concurrency: int, repeat: int = 0) -> str:
    """File-name-safe key of one cell: `<arm>__<domain>__c<concurrency>__r<repeat>`."""
    return f"{safe_name(arm)}__{safe_name(domain)}__c{int(concurrency)}__r{int(repeat)}"
