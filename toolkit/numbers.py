"""Numbers that must be finite and in range: one definition for spec fields (pydantic) and for command-line
options (Typer), so that `.inf`, `.nan` and negatives are refused wherever a rate, a burstiness, a duration,
a length, a bound or a threshold is read.

Spec fields: every spec model (toolkit.specs.base.StrictModel) refuses inf and nan in any float field
(`allow_inf_nan=False`); the range is the type's:

    rates: list[Positive]            > 0, finite
    temperature: NonNegative = 0.0   >= 0, finite
    output_len: PositiveInt = 128    a whole number >= 1

Options: `typer.Option(..., parser=positive)` (or non_negative, positive_int, parser(lower=...)): a bad value is click's usage
error, exit 2, `Invalid value for '--fail-on-regression': -5 is not a finite number > 0`.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import Field

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]


def problem(value: object, *, lower: float = 0.0, inclusive: bool = False, integer: bool = False) -> str | None:
    """What is wrong with a number that must be finite and above `lower` (at or above it when inclusive);
    None when nothing is. The one rule the option parsers below share."""
    what = "a whole number" if integer else "a finite number"
    bound = f"{'>=' if inclusive else '>'} {lower:g}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{value!r} is not {what} {bound}"
    if not math.isfinite(value):
        return f"{value!r} is not a finite number (allowed: {what} {bound})"
    if value < lower or (value == lower and not inclusive):
        return f"{value:g} is out of range (allowed: {what} {bound})"
    return None


def parser(*, lower: float, inclusive: bool, integer: bool = False):
    """An option parser (`typer.Option(parser=...)`) for a finite number above `lower` (at or above when
    inclusive): a bad value is a usage error naming the option, exit 2."""

    def parse(text: str | float | int):
        import typer

        if isinstance(text, (int, float)) and not isinstance(text, bool):
            value: object = text
        else:
            try:
                value = int(str(text).strip()) if integer else float(str(text).strip())
            except ValueError:
                value = str(text)
        why = problem(value, lower=lower, inclusive=inclusive, integer=integer)
        if why:
            raise typer.BadParameter(why)
        return value

    return parse


def argtype(*, lower: float, inclusive: bool, integer: bool = False):
    """The same rule as an argparse `type=` (`python -m toolkit.loadgen`): a bad value is argparse's usage
    error naming the option, exit 2."""

    def parse(text: str):
        import argparse

        try:
            value: object = int(text.strip()) if integer else float(text.strip())
        except ValueError:
            value = text
        why = problem(value, lower=lower, inclusive=inclusive, integer=integer)
        if why:
            raise argparse.ArgumentTypeError(why)
        return value

    return parse


positive = parser(lower=0.0, inclusive=False, integer=False)
non_negative = parser(lower=0.0, inclusive=True, integer=False)
positive_int = parser(lower=1, inclusive=True, integer=True)
