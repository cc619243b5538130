"""`toolkit results recode RUN...`: a finished run's request records re-encoded into the records codec
(toolkit.results.records: cells/<key>.jsonl.gz -> cells/<key>.rec.xz, times as integer microseconds, xz),
recorded in the run's RECODED.json so the re-encoding is never read as the original.

Why: records written before the load generator rounded times to the microsecond (2026-12-06) carry 15
significant digits of float noise per chunk time; a c=64 cell stored 403 KB, 49 KB re-encoded. The lossless
alternatives do not come close (xz of the same bytes: 320 KB).

What is kept: manifest.json, the cells' summaries and per-request columns (.npz) and every other file, as
the run wrote them; only the records change. RECODED.json says, for each re-encoded file: the file it
replaced and that file's sha256 (the run's own SHA256SUMS line), the sha256 of its decompressed JSON lines,
whether the re-encoding is exact (the decoded records give those very lines again: the chain to the run's
sums is then checked by verify) and the precision otherwise (records.PRECISION_MS: every time rounded to the
microsecond). verify compares the decoded records with the run's own columns and cell figures within
that rounding (toolkit.results.consistency.within_rounding) and says the archive was re-encoded.

Refused: a run that does not verify (its evidence would be lost), an interrupted one (resume appends to
plain files), one without SHA256SUMS. Running it again changes nothing. A new run needs none of this: finalize writes
its records in the codec when that is exact (toolkit.results.compact.finish).
"""

from __future__ import annotations

from pathlib import Path

from toolkit.checksums import NAME as SUMS
from toolkit.errors import ToolkitError
from toolkit.results.compact import _interrupted
from toolkit.results.records import reencode
from toolkit.results.verify import errors, verify_run


def recode(run: Path) -> list[str]:
    """Re-encode every plain records file of one finished run; returns the files re-encoded (relative)."""
    run = Path(run)
    if not (run / SUMS).is_file():
        raise ToolkitError(f"{run} has no {SUMS}: only a finished run is re-encoded", file=run)
    problems = errors(verify_run(run))
    if problems:
        raise ToolkitError(f"{run} does not verify ({problems[0]}); it is left as it is", file=run,
                           hint="`toolkit results verify` lists every problem")
    if _interrupted(run):
        raise ToolkitError(f"{run} was interrupted: resume may still complete it, so it is left as it is", file=run)
    return reencode(run, exact_only=False)
