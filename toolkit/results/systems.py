"""What system a run measured: the engine (name and version), the GPU model of its machine, and the target its
baseline served (the name clients send, and the weights' sha256 where the Environment pins them). Speed-ups
measured on one system say nothing about the accuracy of a prediction for another: the surface's check
(toolkit/results/surface.py) is made only between runs whose systems agree, and says where they differ.

    system_of(archive)          # System
    system_differences(a, b)    # [] when the same system, else one phrase per difference
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.results.archive import Archive


@dataclass(frozen=True)
class System:
    engine: str | None
    engine_version: str | None
    gpus: tuple[str, ...]
    target: str | None
    weights: tuple[str, ...]  # sha256 of the pinned weights (sorted), () when none are pinned


def system_of(a: Archive) -> System:
    from toolkit import engines

    m = a.manifest.model_dump(mode="json")
    resolved = (m.get("environment") or {}).get("resolved") or {}
    engine = resolved.get("engine")
    controller = (m.get("host") or {}).get("controller") or {}
    versions = controller.get("engines") or {}
    gpus = ((controller.get("gpu") or {}).get("gpus")) or []
    preset = ((m.get("arms") or {}).get(m.get("baseline") or "") or {}).get("preset") or {}
    try:
        target = engines.get(engine).served_name(preset) if engine else None
    except Exception:  # an engine this toolkit does not know (an imported run): its model field, if any
        target = None
    return System(engine=engine, engine_version=versions.get(engine) if engine else None,
                  gpus=tuple(sorted(str(g.get("name")) for g in gpus if isinstance(g, dict) and g.get("name"))),
                  target=target or resolved.get("model"),
                  weights=tuple(sorted(str(v) for v in (resolved.get("weights") or {}).values())))


def system_differences(a: Archive, b: Archive) -> list[str]:
    """Where the systems of runs a and b differ, in words (a field one side does not record is not compared)."""
    sa, sb = system_of(a), system_of(b)
    out = []
    for what, x, y in (("engine", sa.engine, sb.engine), ("engine version", sa.engine_version, sb.engine_version),
                       ("GPU", ", ".join(sa.gpus) or None, ", ".join(sb.gpus) or None),
                       ("target served by the baseline", sa.target, sb.target)):
        if x is not None and y is not None and x != y:
            out.append(f"{what} {x} vs {y}")
    if sa.weights != sb.weights and (sa.weights or sb.weights):
        out.append("pinned weights " + ("differ" if sa.weights and sb.weights else
                                        "recorded on one side only (random or unpinned on the other)"))
    return out
