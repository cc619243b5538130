"""What the confirmation says about the winner, in words, written once: the verdict against the preset it
would replace (report.md, the terminal report and `--json` carry it), and what `--out` writes beside each
tuned value and warns about. Both read the same head-to-head split of the held-out cells.

    verdict(cells, best, arm)      "t05 is significantly faster than ngram as it was at coding c=4; ..."
    write_back_texts(res, out)     the comment per tuned value, the threshold's comment, the caution
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath

from toolkit.schema.tune import ConfirmedCell, TuneResult


@dataclass(frozen=True)
class HeadToHead:
    """The held-out cells of the winner against the arm as it was. A cell a verdict may not use (DRIFT,
    failed, capped, stalled, too few requests: `excluded`) is skipped, never faster or slower."""

    usable: list[ConfirmedCell]
    skipped: list[ConfirmedCell]
    better: list[ConfirmedCell]
    worse: list[ConfirmedCell]


def head_to_head(cells: list[ConfirmedCell]) -> HeadToHead:
    usable = [c for c in cells if not c.excluded]
    return HeadToHead(usable=usable, skipped=[c for c in cells if c.excluded],
                      better=[c for c in usable if (c.vs_incumbent.ci_low or 0) > 1],
                      worse=[c for c in usable if c.vs_incumbent.ci_high is not None and c.vs_incumbent.ci_high < 1])


def _where(cs: list[ConfirmedCell]) -> str:
    return ", ".join(f"{c.domain} c={c.concurrency}" for c in cs)


def _codes(cell: ConfirmedCell) -> str:
    """`DRIFT`, `capped`, ...: why a cell is no claim, short."""
    out = {x.split(": ", 1)[-1].split(" (", 1)[0] for x in cell.excluded}  # `arm: code (why)`
    return "/".join(sorted(out)).replace("drift", "DRIFT")


def verdict(cells: list[ConfirmedCell], best: str, arm: str) -> str:
    """The winner against the preset it replaces, both measured on the same held-out prompts."""
    h = head_to_head(cells)
    tail = ("; no claim at " + ", ".join(f"{c.domain} c={c.concurrency} ({_codes(c)})" for c in h.skipped)
            if h.skipped else "")
    if not h.usable:
        return f"no claim: no held-out cell is one a verdict may use{tail}"
    if not h.better and not h.worse:
        return f"{best} and {arm} as it was are not significantly different on held-out prompts in any cell{tail}"
    parts = ([f"significantly faster than {arm} as it was at {_where(h.better)}"] if h.better else []) + \
            ([f"significantly slower at {_where(h.worse)}"] if h.worse else [])
    return (f"{best} is " + "; ".join(parts) + (" (the rest ~)" if len(h.better) + len(h.worse) < len(h.usable)
                                                 else "") + tail)


@dataclass(frozen=True)
class WriteBack:
    note: str  # beside each tuned value: the session, the trial, what the held-out prompts said
    threshold_note: str  # beside the disable threshold (or the arm): the advice
    caution: str | None  # the winner is not faster than the preset it replaces somewhere: say so


def write_back_texts(res: TuneResult, out_env: Path) -> WriteBack:
    """The comments `--out` writes into the tuned environment, and the warning it prints, for a complete
    session's result."""
    conf, best = res.confirmation, res.best
    sid = f"{PurePath(res.session).parent.name}/{PurePath(res.session).name}"
    speedups = [c.speedup for c in conf.cells if c.speedup is not None]
    held = f", {min(speedups):.2f}-{max(speedups):.2f}x on held-out prompts" if speedups else ""
    h = head_to_head(conf.cells)  # no claim from a DRIFT cell
    caution = None
    if h.worse or not h.better:
        held += f"; {'slower than' if h.worse else 'not faster than'} {res.arm} as it was in some cells"
        caution = (f"on held-out prompts, {conf.verdict}; {out_env} holds the tuned setting all the same: "
                   "compare before you adopt it")
    d = conf.decision
    if d is not None and not d.adopt:  # written only with --write-anyway
        held += f"; {d.says}: not shown to beat {res.arm} as it was"
        caution = (f"{d.says}: {d.reason}; {out_env} holds the tuned setting because of --write-anyway")
    drift = sum(c.drift for c in conf.cells)
    held += f"; load drift in {drift} of {len(conf.cells)} cells: see its report" if drift else ""
    return WriteBack(note=f"bench tune {sid} (trial {best.trial}{held})",
                     threshold_note=f"{conf.advice} (bench tune {sid})", caution=caution)
