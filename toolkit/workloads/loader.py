"""Resolve a workload reference into prompts: bundled names, the user's JSON lines, or match-training.

    load_workload("coding", base_dir=..., seed=0)
    load_workload(Workload(name="mine", path="data/mine.jsonl", sample=100, holdout="train.jsonl"), ...)
    load_workload("match-training", base_dir=..., seed=0, training=Path("train.jsonl"))

The hash is the sha256 of the canonical JSON lines of the prompts actually used (after sampling and
holdout): the same prompts give the same hash, any change in content changes it.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field

from toolkit.schema.records import Prompt
from toolkit.errors import ToolkitError
from toolkit.fsutil import folder_not_file
from toolkit.specs import canonical_json
from toolkit.specs.matrix import Workload, workload_name
from toolkit.workloads.bundled import BUNDLED, MATCH_TRAINING, bundled, read_prompts
from toolkit.workloads.classify import classify
from toolkit.workloads.formats import normalised_hash

MATCH_DEFAULT_N = 100


class LoadedWorkload(BaseModel):
    name: str = Field(description="the cell's domain label in results (workload name)")
    domain: str = Field(description="bundled domain, 'mixed' for match-training, or the file's name")
    hash: str = Field(description="sha256 of the canonical content of `prompts`")
    prompts: list[Prompt]
    source: str = Field(description="where the prompts came from and how they were selected")
    excluded: int = Field(0, description="prompts dropped by holdout")
    available: int = Field(0, description="prompts before sampling")
    # a `trace:` workload: request i's send time (seconds after the first, speed 1), the speeds it is replayed
    # at and, for each, the mean rate that keys its cells (toolkit.schema.trace.offered_rate)
    arrivals: list[float] | None = None
    speeds: list[float] = Field(default_factory=list)
    rates: list[float] = Field(default_factory=list)


def content_hash(prompts: list[Prompt]) -> str:
    h = hashlib.sha256()
    for p in prompts:
        h.update(canonical_json(p.model_dump(exclude_none=True)).encode())
        h.update(b"\n")
    return h.hexdigest()


def sample(prompts: list[Prompt], n: int | None, seed: int, what: str) -> list[Prompt]:
    """A seeded sample of n prompts, kept in file order (None: all of them)."""
    if n is None or n == len(prompts):
        return list(prompts)
    if n < 1:
        raise ToolkitError(f"{what}: sample size must be at least 1, not {n}")
    if n > len(prompts):
        raise ToolkitError(f"{what}: asked for {n} prompts but only {len(prompts)} are available",
                           hint="lower `sample`, or give a larger file")
    picked = sorted(random.Random(f"sample:{seed}").sample(range(len(prompts)), n))
    return [prompts[i] for i in picked]


def holdout(prompts: list[Prompt], training: Path) -> tuple[list[Prompt], int]:
    """Drop prompts whose normalised content also appears in the training file."""
    seen = {normalised_hash(p) for p in read_prompts(training)}
    kept = [p for p in prompts if normalised_hash(p) not in seen]
    return kept, len(prompts) - len(kept)


def _resolve(base_dir: Path, path: str | Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else base_dir / p


def allocate(mix: dict[str, float], n: int) -> dict[str, int]:  # data-keyed: domain
    """Split n into integer counts proportional to mix (largest remainder, ties by name)."""
    total = sum(mix.values())
    exact = {d: n * w / total for d, w in mix.items()}
    counts = {d: int(v) for d, v in exact.items()}
    rest = sorted(exact, key=lambda d: (-(exact[d] - counts[d]), d))
    for d in rest[: n - sum(counts.values())]:
        counts[d] += 1
    return {d: c for d, c in counts.items() if c}


def match_training(training: Path, *, seed: int, n: int | None) -> LoadedWorkload:
    """Bundled prompts drawn so that their domain mix matches the classified mix of the training file."""
    train = read_prompts(training)
    mix = Counter(classify(p).domain for p in train)
    n = n or MATCH_DEFAULT_N
    counts = allocate(dict(mix), n)
    picked: list[Prompt] = []
    for domain in BUNDLED:
        if counts.get(domain):
            pool, _ = holdout(bundled(domain), training)
            picked += sample(pool, counts[domain], seed, f"{MATCH_TRAINING} ({domain}, less prompts also in the training file)")
    random.Random(f"order:{seed}").shuffle(picked)
    share = ", ".join(f"{d} {counts[d]}" for d in BUNDLED if d in counts)
    return LoadedWorkload(name=MATCH_TRAINING, domain="mixed", hash=content_hash(picked), prompts=picked,
                          source=f"{MATCH_TRAINING} of {training} ({len(train)} records classified; drew {share})",
                          available=sum(mix.values()))


def load_workload(ref: str | Workload, *, base_dir: Path, seed: int, n: int | None = None,
                  training: Path | None = None, output_len: int = 128) -> LoadedWorkload:
    """Prompts for one workload reference. `n` (or the Workload's `sample`) draws a seeded sample;
    `training` is the drafter's training data, needed by match-training. Relative paths are taken
    from base_dir (the matrix file's folder). `output_len`: a trace request's max tokens where it gives none."""
    base_dir = Path(base_dir)
    if isinstance(ref, Workload) and ref.trace is not None:
        return load_trace(ref, base_dir, seed, output_len)
    if isinstance(ref, str):
        if ref.endswith((".jsonl", ".json")) or "/" in ref or _resolve(base_dir, ref).is_file():
            ref = Workload.model_construct(name=name_of(ref), path=ref, sample=None, holdout=None)
        elif ref in BUNDLED or ref == MATCH_TRAINING:
            ref = Workload.model_construct(name=ref, path=None, sample=None, holdout=None)
        else:
            bundled(ref)  # raises: unknown name
    n = n if n is not None else ref.sample
    held = _resolve(base_dir, ref.holdout) if ref.holdout else None
    if ref.path is None and ref.name == MATCH_TRAINING:
        if training is None:
            raise ToolkitError(f"`{MATCH_TRAINING}` needs the drafter's training data",
                               hint="set `training_data:` in the matrix, or pass --train")
        return match_training(_resolve(base_dir, training), seed=seed, n=n)
    if ref.path is None:
        prompts, source, domain = bundled(ref.name), f"bundled:{ref.name}", ref.name
    else:
        path = _resolve(base_dir, ref.path)
        prompts, source, domain = read_prompts(path), str(path), path.stem
    available, excluded = len(prompts), 0
    if held is not None:
        prompts, excluded = holdout(prompts, held)
        source += f" minus {excluded} prompts also in {held}"
        if not prompts:
            raise ToolkitError(f"workload {ref.name!r}: all {available} prompts are also in the holdout file {held}",
                               hint="evaluate on prompts the drafter was not trained on")
    prompts = sample(prompts, n, seed, ref.name)
    if n is not None:
        source += f" (seeded sample of {n}, seed {seed})"
    return LoadedWorkload(name=ref.name, domain=domain, hash=content_hash(prompts), prompts=prompts, source=source,
                          excluded=excluded, available=available)


def name_of(path: str) -> str:
    """A workload name (lower-case, digits, . _ -) from a file path."""
    return workload_name(path)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:,.1f} h" if seconds < 3 * 86400 else f"{seconds / 86400:,.0f} days"


def load_trace(ref: Workload, base_dir: Path, seed: int, output_len: int) -> LoadedWorkload:
    """A `trace:` workload: one prompt per trace request, in time order (prompt i is request i in every arm),
    its send times (seconds from the first, at speed 1) and its speeds. A trace without `output_length` sends
    `output_len` tokens at most. The hash covers the prompts and the times."""
    from toolkit.schema.trace import offered_rate, read_trace, trace_prompts

    path = _resolve(base_dir, ref.trace)
    if folder := folder_not_file(path):
        raise ToolkitError(f"trace: {folder}", hint="name a trace file (JSON lines, docs/loadgen.md#traces)")
    if not path.is_file():
        raise ToolkitError(f"trace file {ref.trace} not found ({path})",
                           hint="give the path of a trace relative to the matrix file (docs/loadgen.md#traces); "
                                "a Mooncake trace is converted with `toolkit bench trace-import`")
    trace = read_trace(path)
    times = [r.timestamp - trace[0].timestamp for r in trace]
    if len(trace) < 2 or times[-1] <= 0:
        raise ToolkitError("a trace replayed in a Matrix needs two requests at different times: its cells are keyed "
                           "by the trace's mean rate", file=path)
    for s in ref.speeds:  # the cell's wall time, known before it starts: the trace's span at this speed
        if times[-1] / s > ref.max_hours * 3600:
            raise ToolkitError(f"replaying {ref.trace} at speed {s:g} takes {_hours(times[-1] / s)} (its requests "
                               f"span {_hours(times[-1])}): more than max_hours {ref.max_hours:g} h",
                               hint=f"replay it faster (speed: {times[-1] / (ref.max_hours * 3600):.3g} or more), "
                                    f"cut the trace, or raise `max_hours:` on this workload if the wait is meant")
    prompts = trace_prompts(trace, ref.name, output_len, seed)
    h = hashlib.sha256(f"{content_hash(prompts)}\n{canonical_json(times)}".encode()).hexdigest()
    return LoadedWorkload(name=ref.name, domain=ref.name, hash=h, prompts=prompts, available=len(prompts),
                          source=f"trace {path} ({len(trace)} requests over {times[-1]:.3g} s; speed "
                                 f"{', '.join(f'{s:g}' for s in ref.speeds)})",
                          arrivals=times, speeds=ref.speeds, rates=[offered_rate(times, s) for s in ref.speeds])
