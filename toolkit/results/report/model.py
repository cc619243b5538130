"""The report model: a report is a title, a list of blocks and the machine-readable data, built once
(run.py, compare.py, listing.py) and then rendered (render.py) as terminal text, Markdown, HTML or
JSON. Every cell string is formatted here, so every rendering shows the same digits."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from toolkit.schema.records import Stat


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Para:
    text: str


@dataclass
class Facts:
    """Key-value rows (a run's facts); with two or more value columns, side by side (A and B)."""
    rows: list[list[str]]
    columns: list[str] | None = None


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]
    align: str = "l"  # one letter per column, l(eft) or r(ight); columns past its end are numbers (r)

    def right(self, i: int) -> bool:
        return (self.align[i] if i < len(self.align) else "r") == "r"


@dataclass
class Items:
    items: list[str]


@dataclass
class Code:
    text: str


@dataclass
class Image:
    name: str
    caption: str
    png: bytes


Block = Heading | Para | Facts | Table | Items | Code | Image


@dataclass
class Report:
    title: str
    blocks: list[Block] = field(default_factory=list)
    data: dict | list = field(default_factory=dict)  # what render_json writes (and `--json` prints)

    def add(self, *blocks: Block) -> "Report":
        self.blocks.extend(blocks)
        return self

    def images(self) -> list[Image]:
        return [b for b in self.blocks if isinstance(b, Image)]


# -- formatting, the one place numbers become strings

def fmt_num(v: float | None) -> str:
    """Four significant figures or so: 1,234 / 123.4 / 12.34 / 0.123."""
    if v is None or not math.isfinite(v):
        return "-"
    av = abs(v)
    if av >= 1000:
        return f"{v:,.0f}"
    if av >= 100:
        return f"{v:.1f}"
    if av >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def fmt_stat(s: Stat | None, field_: str = "p50") -> str:
    """One field of a Stat; `*` when that percentile comes from too few samples."""
    if s is None:
        return "-"
    return fmt_num(getattr(s, field_)) + ("*" if field_ in s.unreliable else "")


def fmt_centre(v: float | None, lo: float | None, hi: float | None) -> str:
    if v is None:
        return "-"
    if lo is None or hi is None:
        return fmt_num(v)
    return f"{fmt_num(v)} [{fmt_num(lo)}, {fmt_num(hi)}]"


def fmt_share(v: float | None, lo: float | None = None, hi: float | None = None) -> str:
    """A share as a percentage, with its interval when given: 93.8% [85.0%, 97.6%]."""
    if v is None or not math.isfinite(v):
        return "-"
    if lo is None or hi is None:
        return f"{v:.1%}"
    return f"{v:.1%} [{lo:.1%}, {hi:.1%}]"


def fmt_pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.2f}%"


def short(v: str, width: int = 48) -> str:
    """A sha256 as its first 12 digits; long values cut with `...`."""
    if len(v) == 64 and all(ch in "0123456789abcdef" for ch in v):
        return v[:12]
    return v if len(v) <= width else v[: width - 3] + "..."
