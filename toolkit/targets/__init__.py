"""Where a matrix's arms run, in one home: one `Target` adapter per kind (base.py), this machine (local.py),
the hosts of a Hosts spec (hosts.py), servers someone else started (external.py) and Slurm jobs (slurm.py),
looked up by the Matrix's `target.kind`. bench asks the Target (slots, launchers, preflight, resume cleanup,
manifest record) rather than comparing the kind with a name.

    t = get("slurm")                 # Target; an unknown kind: ToolkitError with a did-you-mean
    t.slots(spec, "sglang", None)    # [Slot(name, target=SlurmTarget(...), arms, hardware)]
    register(target)                 # another kind (a test's fake one; next, Kubernetes): its name becomes a
                                     # `target.kind` the Matrix spec accepts

It sits on a floor of its own above the launchers it makes (toolkit.serve, toolkit.slurm) and below bench
(tests/test_import_cycles.py).
"""

from __future__ import annotations

import difflib

from toolkit.errors import ToolkitError
from toolkit.specs import matrix as matrix_spec
from toolkit.targets import external, hosts, local, slurm
from toolkit.targets.base import Slot, SlotTarget, Target, deal, shares_hardware

_REGISTRY: dict[str, Target] = {t.kind: t for t in (local.TARGET, hosts.TARGET, external.TARGET, slurm.TARGET)}
BUILTIN: tuple[str, ...] = tuple(_REGISTRY)  # the kinds shipped with the toolkit (the Matrix's schema lists them)

__all__ = ["BUILTIN", "Slot", "SlotTarget", "Target", "deal", "from_option", "get", "lookup", "names",
           "register", "shares_hardware", "unregister"]


def register(target: Target) -> Target:
    """Make `target` known by its kind (replacing one of that kind), to the runner and the Matrix spec; returns it."""
    _REGISTRY[target.kind] = target
    matrix_spec.TARGET_KINDS.add(target.kind)
    return target


def unregister(kind: str) -> None:
    if kind in BUILTIN:
        raise ToolkitError(f"target kind {kind!r} ships with the toolkit and stays registered")
    _REGISTRY.pop(kind, None)
    matrix_spec.TARGET_KINDS.discard(kind)


def names() -> list[str]:
    return list(_REGISTRY)


def lookup(kind: str | None) -> Target | None:
    return _REGISTRY.get(kind) if kind else None


def get(kind: str) -> Target:
    t = lookup(kind)
    if t is None:
        close = difflib.get_close_matches(str(kind), names(), n=1, cutoff=0.6)
        raise ToolkitError(f"unknown target kind {kind!r}",
                           hint=f"did you mean {close[0]!r}?" if close else f"kinds: {', '.join(names())}")
    return t


def from_option(text: str) -> dict:
    """The Matrix `target:` that a `--target` option means (`local`, an http(s) URL, a Hosts spec PATH[:GROUP]):
    the first registered kind that reads it as its own."""
    for t in _REGISTRY.values():
        got = t.from_option(text)
        if got is not None:
            return got
    raise ToolkitError(f"--target {text}: no target kind reads it", hint="give `local`, an http(s) URL, or a "
                       "Hosts spec PATH[:GROUP]")
