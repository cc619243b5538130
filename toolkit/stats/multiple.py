"""Many tests at once: Holm's step-down adjustment (the chance of any false alarm across a family, at most alpha),
with tests that repeat a member of the family (a metric derived from another) adjusted in its place instead of
counting as members of their own."""

from __future__ import annotations

from bisect import bisect_left


def _holm_steps(ps: list[float]) -> list[float]:
    """Holm's adjusted p of each of the sorted p-values ps."""
    steps, running = [], 0.0
    for rank, p in enumerate(ps):
        running = max(running, min(1.0, (len(ps) - rank) * p))
        steps.append(running)
    return steps


def holm(pvalues: list[float], stands_for: list[int | None] | None = None) -> list[float]:
    """Holm-Bonferroni adjusted p-values (controls the chance of any false alarm across the family).
    `stands_for[i]`: None when test i is a member of the family (default: all are); else the index of the
    member it repeats (in a diff: a metric that tracks another, toolkit/results/diff.py `family`), and test i
    is adjusted as if it took that member's place: it adds no test to the family."""
    stands_for = stands_for or [None] * len(pvalues)
    members = [i for i, j in enumerate(stands_for) if j is None]
    ps = sorted(pvalues[i] for i in members)
    steps = _holm_steps(ps)
    return [steps[bisect_left(ps, p)] if j is None else _in_place_of(ps, steps, pvalues[j], p)
            for p, j in zip(pvalues, stands_for)]


def _in_place_of(ps: list[float], steps: list[float], p_member: float, p: float) -> float:
    """Holm's adjusted p of p in the sorted family ps (steps: their adjusted values) with p in the place of
    the member p_member: the members below both keep their ranks, those between move up one."""
    m, s, r = len(ps), bisect_left(ps, p_member), bisect_left(ps, p)
    if r <= s:  # p sorts at rank r, nothing before it moved
        return max(steps[r - 1] if r else 0.0, min(1.0, (m - r) * p))
    between = [min(1.0, (m - k + 1) * ps[k]) for k in range(s + 1, r)]
    return max([steps[s - 1] if s else 0.0, *between, min(1.0, (m - r + 1) * p)])
