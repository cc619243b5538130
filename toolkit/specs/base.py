"""Shared pieces of the spec models: strict base model and common field types."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from toolkit.numbers import NonNegative, NonNegativeInt, Positive, PositiveInt  # noqa: F401 - the spec types

NAME_RE = r"^[a-z0-9][a-z0-9._-]*$"
# a name becomes file and folder names (results/<matrix>/, cells/<arm>__<domain>__...): two of them and a key's
# suffix fit the 255 bytes a file name may have on most file systems
NAME_MAX = 100
Name = Annotated[str, Field(pattern=NAME_RE, max_length=NAME_MAX,
                            description=f"a lower-case name: letters, digits, . _ -, at most {NAME_MAX} characters, "
                                        "e.g. chat-h100")]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="64 lower-case hex digits: the first word "
                                                                 "`sha256sum FILE` prints")]


@dataclass(frozen=True)
class Hash:
    """A field's hash policy, declared on the field (`name: Annotated[T, Hash.never(...)] = ...`) and read by
    toolkit.specs.spec_hash; a field with none is hashed as it is.

    never         not part of what is measured or served (a Matrix's `slo`, `tune`): never hashed
    omit-default  added after hashing began: left out of the hash at its default, so the hash of a spec that
                  does not set it holds (a Matrix's `launches`, `workers`; an Environment's `dummy_models`)
    """

    policy: Literal["never", "omit-default"]
    why: str

    @classmethod
    def never(cls, why: str) -> "Hash":
        return cls("never", why)

    @classmethod
    def omit_default(cls, why: str) -> "Hash":
        return cls("omit-default", why)


class StrictModel(BaseModel):
    """Unknown keys are errors; values are not silently coerced across types; no number of a spec is inf or
    nan (`.inf` would validate every `gt=0` bound, run every cell and fail at the report: toolkit/numbers.py)."""

    model_config = ConfigDict(extra="forbid", strict=False, frozen=False, allow_inf_nan=False)


Scalar = str | int | float | bool


def _check_arg_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value) or (
            isinstance(value, list) and any(isinstance(v, float) and not math.isfinite(v) for v in value)):
        raise ValueError("an argument value must be a finite number (no .inf or .nan)")
    if isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        return value
    if value is None:
        raise ValueError("an argument needs a value: write `true` for an on/off flag, or the value it takes")
    raise ValueError(f"an argument value must be a string, number, boolean or a list of them, not {type(value).__name__}")


ArgValue = Annotated[Any, BeforeValidator(_check_arg_value), Field(
    description="a flag's value: a string, a finite number, `true` for an on/off flag, or a list of them, e.g. 0.85")]

FLAG_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def _check_flag_name(key: str) -> str:
    if key.startswith("-"):
        raise ValueError(f"write argument {key!r} without leading dashes: {key.lstrip('-')!r}")
    if "_" in key:
        raise ValueError(f"argument {key!r} must be written as on the command line: {key.replace('_', '-')!r}")
    if not FLAG_RE.match(key):
        raise ValueError(f"argument name {key!r} is not a command-line flag name (lower-case, digits, '-')")
    return key


FlagName = Annotated[str, AfterValidator(_check_flag_name), Field(
    description="a flag's name as on the command line without its leading dashes: lower-case, digits and '-', "
                "e.g. mem-fraction-static")]
ServerArgs = dict[FlagName, ArgValue]
