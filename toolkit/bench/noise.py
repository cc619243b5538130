"""`toolkit bench noise MATRIX [--launches N]`: calibrate the launch-to-launch noise of this GPU and
environment. An A/A run: the Matrix as it is, with N launches per arm (rounds interleaved like any run
with `launches:`), archived as a normal run whose manifest says `purpose: noise-calibration`.

`results diff` and `results reproduce` find it again (toolkit.results.noise.find_calibration: the newest
complete calibration under the same results root with the same environment hash on the same GPU model)
when they compare runs of one launch a side, and say so (`launch noise calibration <run id>`); the runner
widens its one-round speed-up CIs by it. One made on a busy host is refused by them (said here at once too).
docs/results.md#launch-noise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import yaml

from toolkit.errors import ToolkitError
from toolkit.schema.manifest import NOISE_CALIBRATION
from toolkit.specs import LoadedSpec, load_spec

DEFAULT_LAUNCHES = 3


def _busy(run: Path) -> str | None:
    """Why the calibration just archived was made on a busy host (toolkit.results.noise.busy_host), or None."""
    from toolkit.results.archive import open_archive
    from toolkit.results.noise import busy_host

    try:
        return busy_host(open_archive(run))
    except Exception:  # noqa: BLE001 - a run that does not open is not called busy here; verify names it
        return None


def calibrate(spec: LoadedSpec, *, launches: int = DEFAULT_LAUNCHES, results_root: Path, progress: Any = None,
              log: Callable[[str], None] = print):
    """Run the calibration and return its MatrixResult. The Matrix is written beside the original with its
    launches set (so relative paths resolve, and the archive's inputs/ hold the bytes that ran), then removed."""
    from toolkit.bench.matrix import run_matrix

    if launches < 2:
        raise ToolkitError(f"--launches {launches}: a calibration needs at least 2 launches per arm to see their "
                           "spread", hint="--launches 3 (the default) or more")
    data = spec.model.model_dump(mode="json", exclude_none=True)
    data["launches"] = launches
    path = spec.path.with_name(f".{spec.path.stem}.noise-{launches}.yaml")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        loaded = load_spec(path, expect="Matrix")
        log(f"noise calibration: {spec.model.name}, {launches} launches per arm of {', '.join(spec.model.arm_names)} "
            "(an A/A run: nothing changes between launches but the launch)")
        result = run_matrix(loaded, results_root=results_root, progress=progress, log=log, purpose=NOISE_CALIBRATION)
        busy = _busy(result.path)
        if busy:  # said now, not first at the verdict that refuses it
            log(f"noise calibration: {busy}: diff, reproduce and the runner will refuse it (they fall back to the "
                "default); rerun `toolkit bench noise` on a quiet host")
        return result
    finally:
        path.unlink(missing_ok=True)
