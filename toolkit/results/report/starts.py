"""Per launch, where its start-up and its stop went: the start-up's phases read from the server's own log
(toolkit.serve.logs.startup_phases; SGLang's marks in engines.sglang.STARTUP_MARKS) and the stop's two times
(toolkit.serve.stopping: the main process exited, its process group empty). Shown under the report's
timing line; nothing for an archive that holds neither (older runs, engines without the marks)."""

from __future__ import annotations

from toolkit.engines.sglang import STARTUP_MARKS
from toolkit.results.report.model import Items, Para
from toolkit.schema.manifest import Derived, LaunchRecord

NOTE = ("Per launch: seconds from the launch to each mark of the server's own log (whole seconds, +-1 s; SGLang: "
        "first log line = the main process imported, scheduler = its process started and imported, memory pool = "
        "weights and KV cache in place, ready = CUDA graphs captured), and the stop: seconds until the server's main "
        "process exited and until no process of its group was left (the difference: its children's exit, e.g. the "
        "GPU context's teardown).")
_LABELS = {name: label for name, _, label in STARTUP_MARKS}


def starts_blocks(d: Derived) -> list:
    launches = [(arm, r) for arm, runs in d.launches.items() for r in runs]
    rows = [_line(arm, r) for arm, r in launches if r.startup_phases or r.stop.group_empty_s is not None]
    if not rows:
        return []
    summary = _spread("warm starts (the kept cache held files and the start compiled none)",
                      [r.startup_s for _, r in launches if _warm(r) and r.startup_s is not None])
    summary += _spread("stops (until the group was empty)",
                       [r.stop.group_empty_s for _, r in launches if r.stop.group_empty_s is not None])
    return [Para(NOTE), Items(rows)] + ([Para("; ".join(summary) + ".")] if summary else [])


def _spread(what: str, times: list[float]) -> list[str]:
    """'warm starts ...: 5, 53.2-58.1 s, the slowest 9 % above the quickest' (nothing for no times)."""
    if not times:
        return []
    lo, hi = min(times), max(times)
    above = f", the slowest {100 * (hi - lo) / lo:.0f} % above the quickest" if len(times) > 1 and lo > 0 else ""
    return [f"{what}: {len(times)}, {lo:.2f}-{hi:.2f} s{above}" if lo < 10 else
            f"{what}: {len(times)}, {lo:.1f}-{hi:.1f} s{above}"]


def _line(arm: str, r: LaunchRecord) -> str:
    parts = []
    if r.startup_phases:
        order = [*_LABELS, *(k for k in r.startup_phases if k not in _LABELS)]  # the archive sorts its keys
        marks = ", ".join(f"{_LABELS.get(k, k)} {r.startup_phases[k]:.0f}" for k in order if k in r.startup_phases)
        parts.append(f"started {r.startup_s:.1f} s: {marks}" if r.startup_s is not None else f"start-up: {marks}")
    s = r.stop
    if s.group_empty_s is not None:
        leader = f"{s.leader_exit_s:.2f} s" if s.leader_exit_s is not None else "never"
        parts.append(f"stopped: main process {leader}, group {s.group_empty_s:.2f} s"
                     + (f" after {', '.join(s.signals)}" if s.signals else ""))
    if r.warm_start and r.compiled_files:
        warm = f" (kept cache, yet the start compiled {r.compiled_files} kernel file{'s' * (r.compiled_files != 1)})"
    else:
        warm = {True: " (warm)", False: " (cold: no kept cache yet)"}.get(r.warm_start, "")
    return f"{arm} launch {r.launch}{warm}: " + "; ".join(parts)


def _warm(r: LaunchRecord) -> bool:
    """The kept cache held files and the start added none to it (archives before `compiled_files`: the
    first alone)."""
    return bool(r.warm_start) and not r.compiled_files
