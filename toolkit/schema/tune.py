"""A tune session's state (tune.json) and its result (`bench tune --json`), typed: what the session writes,
what `--resume` reads back, what the report and the CLI render.

    TuneState      tune.json: the plan (trials, schedule, prompt split, server), the rungs as they ran, the
                   confirmation, the status, and (once it stops) the result
    Rung           one rung of the search: its trials, requests per cell, runs, scores
    TuneResult     the result: trials (Trial: params, score, cells), winners per cell, best, confirmation
                   (ConfirmedCell per domain x concurrency, crossovers, advice, verdict), runs

Files keep exactly the keys their writer set: `dump()` leaves out a field nobody set (a session that has
not chosen a winner has no `best`; a result without --out has no `out`), so tune.json and the JSON on
stdout are what the dict-based writer produced, key for key. Assign a field to change it (an in-place
append to a list nobody set would be left out).

Shapes of older writers, mapped on load (the file on disk is never rewritten by reading it):

    no `knobs` (before the knob order was kept)   the space's keys of the arm, as tune.json sorted them
    no `seed`, `again`                             0 (the matrix default), no A/A twin
    a confirmation cell without `excluded`         ["drift"] where it drifted (what --out assumed), else []
    without `qualified`, `vs_incumbent`, ...       empty
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolkit.errors import ToolkitError
from toolkit.schema.manifest import Crossover, _validate

FORMAT = "toolkit-tune-session"
VERSION = 1
STATE_FILE = "tune.json"

Status = Literal["running", "partial", "complete", "failed"]
RESUMABLE: tuple[str, ...] = ("running", "partial")  # a session `bench tune --resume` may still go on with


class _Tune(BaseModel):
    """Typed where readers look; any other field a file holds is kept (extra='allow')."""

    model_config = ConfigDict(extra="allow")

    def dump(self) -> dict[str, Any]:  # json-edge: tune.json
        """The JSON document: the fields that were set, in declaration order (see the module docstring)."""
        return self.model_dump(mode="json", exclude_unset=True)


# -- shared by the state and the result

class MatrixRef(_Tune):
    name: str
    path: str
    hash: str = Field(description="spec hash of the user's matrix: --resume refuses another")


class SplitFiles(_Tune):
    all: str = Field(description="the workload as it loads, relative to the session folder")
    tune: str = Field(description="the seeded sample the search sees")


class WorkloadSplit(_Tune):
    all: int
    tune: int
    held_out: int
    files: SplitFiles
    source: str | None = None


class SharedServer(_Tune):
    """The one server every run of a request-level session goes to."""

    port: int
    command: str
    shared_by: str = ""


# -- the state

class RungScore(_Tune):
    """toolkit.tune.search.Score as the state keeps it."""

    geomean: float | None = None
    low: float | None = None
    high: float | None = None
    cells: int = 0


class Rung(_Tune):
    index: int
    trials: list[str]
    requests: int = Field(description="measured requests per cell this rung adds")
    runs: list[str] = Field(default_factory=list, description="run folders, relative to the session")
    status: Literal["complete", "partial"] | None = None
    scores: dict[str, RungScore] = Field(default_factory=dict)
    stopped_early: str | None = None


class ConfirmationPlan(_Tune):
    """The confirmation as the state records it (the figures are in TuneResult.confirmation). It runs in one
    sitting: a resumed session whose confirmation was interrupted runs every arm of it again (`sitting` + 1,
    the interrupted runs listed under `abandoned` and left as they were)."""

    runs: list[str] = Field(default_factory=list)
    status: Literal["complete", "partial"] | None = None
    trials: list[str] = Field(default_factory=list, description="the arm as it was, then the winner")
    requests: int
    sitting: int = Field(0, description="how many times the confirmation was started again from nothing")
    abandoned: list[str] = Field(default_factory=list, description="runs of interrupted sittings, not read")
    machines: dict[str, list[str]] = Field(default_factory=dict,
                                           description="arm -> the machines (host, GPU) its cells ran on")


class TuneState(_Tune):
    format: Literal["toolkit-tune-session"] = FORMAT
    version: int = VERSION
    id: str
    status: Status = "running"
    matrix: MatrixRef
    environment: str
    arm: str
    baseline: str
    engine: str
    level: Literal["request", "server"]
    tune: dict[str, Any] = Field(description="the Matrix's tune: block as it was dumped (--resume compares it)")
    budget: int
    candidates: int
    notes: list[str] = Field(default_factory=list)
    incumbent: dict[str, Any] = Field(default_factory=dict, description="the arm's knob values before the tune")
    trials: dict[str, dict[str, Any]] = Field(description="trial name (t00, ...) -> its knob values")
    schedule: list[int] = Field(description="trials per rung")
    first_requests: int
    confirm_requests: int
    split: dict[str, WorkloadSplit]
    server: SharedServer | None = None
    again: str | None = Field(None, description="the baseline's A/A twin (shared server only)")
    seed: int = 0
    knobs: list[str] = Field(default_factory=list, description="the knobs in the space's order")
    rungs: list[Rung] = Field(default_factory=list)
    confirmation: ConfirmationPlan | None = None
    best: str | None = None
    wall_s: float | None = None
    error: str | None = None
    result: TuneResult | None = None

    @model_validator(mode="before")
    @classmethod
    def _older_writers(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and not raw.get("knobs"):
            space = ((raw.get("tune") or {}).get("space") or {}).get(raw.get("arm")) or {}
            if space:
                raw = {**raw, "knobs": list(space)}
        return raw

    def params(self, trial: str) -> dict[str, Any]:  # data-keyed: knob name
        """A trial's knob values in the space's order (tune.json sorts its keys)."""
        p = self.trials[trial]
        return {k: p[k] for k in self.knobs if k in p}


# -- the result

class Ratio(_Tune):
    speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


class CellRatio(_Tune):
    """A paired speedup over the baseline in one cell (domain x concurrency), with its 95 % CI."""

    domain: str
    concurrency: int
    speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n_pairs: int | None = None


class TrialScore(_Tune):
    geomean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


class Trial(_Tune):
    name: str
    params: dict[str, Any]
    rungs: int = Field(description="rungs it ran in")
    requests_per_cell: int
    score: TrialScore
    cells: list[CellRatio] = Field(default_factory=list)


class Winner(_Tune):
    domain: str
    concurrency: int
    trial: str
    speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n_pairs: int | None = None
    speculation_off: bool = False


class Best(_Tune):
    trial: str
    params: dict[str, Any]
    score: TrialScore


class ConfirmedCell(CellRatio):
    """The winner against the baseline on held-out prompts, with the arm as it was beside it."""

    ci_method: str = "paired bootstrap over the requests (one shared server)"
    incumbent: Ratio = Field(default_factory=Ratio, description="the arm as it was, against the baseline")
    noise: Ratio | None = Field(None, description="A/A: the baseline against its twin")
    vs_incumbent: Ratio = Field(default_factory=Ratio, description="the winner against the arm as it was")
    drift: bool = False
    excluded: list[str] = Field(default_factory=list, description="`arm: why` a verdict may not use the cell")
    qualified: list[str] = Field(default_factory=list, description="`arm: note` it may, with a qualification")

    @model_validator(mode="before")
    @classmethod
    def _older_writers(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and "excluded" not in raw:
            raw = {**raw, "excluded": ["drift"] if raw.get("drift") else []}
        return raw


class Decision(_Tune):
    """Does the winner replace the preset? Only when the launch-aware interval of its ratio to the preset (the
    geometric mean over the usable held-out cells) lies above 1 and the confirmation ran on one machine."""

    adopt: bool
    says: str = Field(description="`adopt the winner` or `keep the preset`")
    reason: str = ""
    vs_preset: Ratio = Field(default_factory=Ratio, description="the winner / the preset as it was")
    vs_baseline: Ratio = Field(default_factory=Ratio, description="the winner / the baseline")
    preset_vs_baseline: Ratio = Field(default_factory=Ratio, description="the preset as it was / the baseline")
    cells: int = Field(0, description="held-out cells in the geometric means")
    interval: str = ""
    machines: dict[str, list[str]] = Field(default_factory=dict)


class Confirmation(_Tune):
    runs: list[str]
    prompts: str = "held-out (never seen by the search)"
    verdict: str = ""
    held_out: dict[str, int] = Field(default_factory=dict)
    requests: int
    launches: int = Field(1, description="server launches per arm (`confirm_launches`; set only where more than 1): "
                                         "`requests` per cell in each")
    cells: list[ConfirmedCell] = Field(default_factory=list)
    crossovers: list[Crossover] = Field(default_factory=list)
    recommended_disable_batch_threshold: int | None = None
    never_pays_off: bool = False
    advice: str = ""
    methodology: list[str] = Field(default_factory=list)
    decision: Decision | None = None


class TuneResult(_Tune):
    session: str
    status: Status
    matrix: str
    arm: str
    baseline: str
    engine: str
    level: Literal["request", "server"]
    budget: int
    candidates: int
    notes: list[str] = Field(default_factory=list)
    space: dict[str, list[Any]] = Field(default_factory=dict, description="knob -> values, in the space's order")
    incumbent: dict[str, Any] = Field(default_factory=dict)
    server: SharedServer | None = None
    split: dict[str, WorkloadSplit] = Field(default_factory=dict)
    trials: list[Trial] = Field(default_factory=list)
    winners: list[Winner] = Field(default_factory=list)
    best: Best | None = None
    confirmation: Confirmation | None = None
    noise: list[CellRatio] | None = Field(None, description="A/A of the search per cell (shared server only)")
    runs: list[str] = Field(default_factory=list)
    wall_s: float | None = None
    decision: str | None = Field(None, description="`adopt the winner` or `keep the preset` (a confirmed session)")
    report: str | None = Field(None, description="report.md (a complete session)")
    out: str | None = Field(None, description="the tuned environment (--out)")

    def params(self, trial: str) -> dict[str, Any]:  # data-keyed: knob name
        return next((t.params for t in self.trials if t.name == trial), {})


TuneState.model_rebuild()


def load_tune_state(path: Path) -> TuneState:
    """A session's tune.json (any shape this toolkit wrote) -> TuneState; a clear error for anything else."""
    f = Path(path)
    try:
        raw = json.loads(f.read_text())
    except (OSError, ValueError) as exc:
        raise ToolkitError(f"cannot read the tune session's state: {exc}", file=f) from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ToolkitError("tune.json is not a tune session's state", file=f)
    if not isinstance(raw.get("version"), int) or raw["version"] > VERSION:
        raise ToolkitError(f"tune session version {raw.get('version')!r} is not one this toolkit reads "
                           f"(1..{VERSION})", file=f, hint="read it with the toolkit that wrote it")
    return _validate(TuneState, raw, f)
