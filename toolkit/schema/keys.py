"""Names every stage agrees on: the archive format and schema version, run statuses, the cell key."""

from __future__ import annotations

import re

SCHEMA_VERSION = 1
FORMAT = "toolkit-run-archive"
# complete: every planned cell ran and succeeded. partial: some cell failed or is missing, or the run was
# interrupted (summary.json's `interrupted` says which; --resume completes an interrupted run only).
# failed: no cell succeeded. README "Exit codes" maps each to the exit of `bench matrix`.
STATUSES = ("complete", "partial", "failed")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def run_status(ok: int, failed: int, missing: int, interrupted: bool) -> str:
    """A run's status from its cells: `ok` and `failed` cells archived, `missing` planned cells never archived.
    An interrupted run is partial whatever it holds (its missing cells are still to run)."""
    if interrupted:
        return "partial"
    if ok == 0:
        return "failed"
    return "complete" if failed == 0 and missing <= 0 else "partial"


def safe_name(text: str) -> str:
    """A name as it may appear in a path: runs of other characters than [A-Za-z0-9._-] become `_`."""
    return _SAFE.sub("_", text)


def launch_suffix(launch: int = 0) -> str:
    """What a launch adds to a name: nothing for the first (launch 0: the names every older archive has),
    `__l<launch>` for the later ones."""
    return f"__l{int(launch)}" if launch else ""


def rate_text(rate: float) -> str:
    """A rate (req/s) as keys and labels write it: the shortest exact form (2, 0.5, 12.5)."""
    return f"{float(rate):g}"


def level_label(concurrency: int, rate: float | None = None) -> str:
    """How a cell's load level reads: `c=16` (closed loop) or `r=2/s` (open loop at 2 requests per second)."""
    return f"r={rate_text(rate)}/s" if rate is not None else f"c={int(concurrency)}"


def synthetic_arm(arm: str, accept_len: float) -> str:
    """The arm a speculative arm becomes at one synthetic acceptance length (the Matrix's
    `synthetic_acceptance:`): `<arm>-synacc<length>`, the decimal point written p (eagle3-synacc2p5 is 2.5),
    so its cells' keys never meet the real arm's."""
    return f"{arm}-synacc{safe_name(rate_text(accept_len).replace('.', 'p'))}"


def synthetic_label(accept_len: float | None) -> str:
    """How outputs mark a synthetic-acceptance figure: `synthetic acc 2.5` ('' for a real one)."""
    return f"synthetic acc {rate_text(accept_len)}" if accept_len is not None else ""


def cell_key(arm: str, domain: str, concurrency: int, repeat: int = 0, launch: int = 0,
             rate: float | None = None) -> str:
    """File-name-safe key of one cell: `<arm>__<domain>__c<concurrency>__r<repeat>`, and `__l<launch>` for a
    server launch after the first (`launches:` in the Matrix), so single-launch keys are the ones they were.
    An open-loop cell (`rates:`) is keyed by its rate instead: `<arm>__<domain>__q<rate>__r<repeat>` (q: queries
    per second, the decimal point written p: q0p5 is 0.5 req/s; its concurrency is only the cap on
    requests in flight)."""
    # no dot in a key (readers split file names at the first dot): 0.5 req/s is q0p5
    level = f"q{safe_name(rate_text(rate).replace('.', 'p'))}" if rate is not None else f"c{int(concurrency)}"
    return f"{safe_name(arm)}__{safe_name(domain)}__{level}__r{int(repeat)}{launch_suffix(launch)}"


def spec_arm_names(arms: list | None) -> list[str]:
    """The arm names of a resolved Matrix's `arms:` (a string, or an `{name, environment, preset}` entry)."""
    return [a["name"] if isinstance(a, dict) else str(a) for a in arms or []]
