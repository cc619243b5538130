"""Where the build stage keeps things, and the build record other stages read.

    cache_dir()                       toolkit.settings: $TOOLKIT_CACHE_DIR, else $XDG_CACHE_HOME/toolkit, else ~/.cache/toolkit
      sglang/<version>/<wheel>/       pinned SGLang wheels and their unpacked source (preflight)
      sglang/git/<url-hash>-<ref>/    git checkouts (source: git)
      parser-deps/                    light packages that let SGLang's own parser import (optional)
      builds/<spec_hash>.json         build records  <- find_build_record(spec_hash)
      builds/logs/<name>-<hash12>-<utc>.log   full build logs

A build record is JSON: image id, tags, spec name and hash, patch sha256s, sglang version, preflight
mode and warnings, duration, log path, smoke check result, created (UTC) and git revision. The bench
archive copies the record of the image it ran (look it up by the image's dev.toolkit.spec-hash label).
"""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.fsutil import write_json
from toolkit.schema.manifest import BuildRecord
from toolkit.settings import cache_dir


def builds_dir() -> Path:
    return cache_dir() / "builds"


def record_path(spec_hash: str) -> Path:
    return builds_dir() / f"{spec_hash}.json"


def write_build_record(record: dict) -> Path:
    return write_json(record_path(record["spec_hash"]), record)


def find_build_record(spec_hash: str) -> BuildRecord | None:
    """The record of the image built from this spec hash (full hash or a unique prefix of 12+), or None. What
    the schema does not name (plan, preflight, smoke, ...) is kept as its extra fields."""
    exact = record_path(spec_hash)
    if exact.is_file():
        return BuildRecord.model_validate(json.loads(exact.read_text()))
    if len(spec_hash) >= 12 and builds_dir().is_dir():
        found = sorted(builds_dir().glob(f"{spec_hash}*.json"))
        if len(found) == 1:
            return BuildRecord.model_validate(json.loads(found[0].read_text()))
    return None
