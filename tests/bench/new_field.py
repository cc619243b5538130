"""A Matrix field that only changes what a cell sends, added the way issue 28 says it is added: one field in the
Matrix spec model, one in CellLoad (tests/bench/test_cell_load.py puts them in place of the real classes). A module
of its own so that the load generator's worker processes can unpickle the load."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from toolkit.loadgen import CellLoad, sent
from toolkit.specs.matrix import Matrix


class MatrixWithTopP(Matrix):
    """The Matrix with one more field, as it would be added in toolkit/specs/matrix.py."""

    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling: the probability mass a token is drawn from")


@dataclass(frozen=True)
class CellLoadWithTopP(CellLoad):
    """CellLoad with the same field, as it would be added in toolkit/loadgen/load.py: sent as `top_p`."""

    top_p: float = sent("top_p", default=1.0)
