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

from toolkit.errors import ToolkitError
from toolkit.registry import Registry
from toolkit.specs import matrix as matrix_spec
from toolkit.targets import external, hosts, local, slurm
from toolkit.targets.base import LaunchArgs, Slot, SlotTarget, Target, TargetSpec, deal, shares_hardware

TARGETS: Registry[Target] = Registry("target kind", "kinds",
                                    {t.kind: t for t in (local.TARGET, hosts.TARGET, external.TARGET, slurm.TARGET)})
BUILTIN: tuple[str, ...] = TARGETS.builtin  # the kinds shipped with the toolkit (the Matrix's schema lists them)

__all__ = ["BUILTIN", "LaunchArgs", "Slot", "SlotTarget", "Target", "deal", "from_option", "get", "lookup", "names",
           "register", "serving", "shares_hardware", "unregister"]


def register(target: Target) -> Target:
    """Make `target` known by its kind (replacing one of that kind), to the runner and the Matrix spec; returns it."""
    matrix_spec.TARGET_KINDS.add(target.kind)
    return TARGETS.register(target.kind, target)


def unregister(kind: str) -> None:
    TARGETS.unregister(kind)
    matrix_spec.TARGET_KINDS.discard(kind)


names, lookup, get = TARGETS.names, TARGETS.lookup, TARGETS.get


def from_option(text: str) -> TargetSpec:
    """The Matrix `target:` that a `--target` option means (`local`, an http(s) URL, a Hosts spec PATH[:GROUP]):
    the first registered kind that reads it as its own."""
    for t in TARGETS:
        got = t.from_option(text)
        if got is not None:
            return got
    raise ToolkitError(f"--target {text}: no target kind reads it", hint="give `local`, an http(s) URL, or a "
                       "Hosts spec PATH[:GROUP]")


def serving(urls: dict[str, str]) -> TargetSpec:
    """The Matrix `target:` that sends each arm to a URL already served ({arm: URL}): the first registered kind
    for servers someone else started (Target.serving)."""
    for t in TARGETS:
        got = t.serving(urls)
        if got is not None:
            return got
    raise ToolkitError("no target kind sends arms to URLs already served", hint="register one whose `serving` does")
