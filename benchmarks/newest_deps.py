"""Try the newest releases of every dependency in a scratch venv and say what breaks (run by hand, not in CI).

    python benchmarks/newest_deps.py                 # newest within pyproject.toml's ranges
    python benchmarks/newest_deps.py --beyond-bounds # upper bounds dropped: what the next bump would bring
    python benchmarks/newest_deps.py --tests tests/specs tests/results

It prints, per package, the locked version (requirements/dev.txt) and the one the scratch venv resolved,
then runs the quickstart matrix (every cell must be ok) and a set of tests against that venv, and ends with
one line per check: ok or what failed. When everything passes, `bash requirements/refresh.sh` moves the lock
forward (docs/install.md). Nothing in the checkout changes; the venv is deleted unless --keep.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TESTS = ["tests/specs", "tests/schema", "tests/results", "tests/serve/test_tserve_versions.py",
                 "tests/loadgen/test_loadgen_transformers.py", "tests/bench/test_matrix_runner.py"]


def locked() -> dict[str, str]:
    text = (ROOT / "requirements" / "dev.txt").read_text()
    return {re.sub(r"[-_.]+", "-", m.group(1)).lower(): m.group(2)
            for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==(\S+?)[\s;\\]", text, re.M)}


def requirements(beyond_bounds: bool) -> list[str]:
    """pyproject's requirements of every extra, the upper bounds dropped when asked."""
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(proj["dependencies"])
    for extra in proj["optional-dependencies"].values():
        reqs += [r for r in extra if not r.startswith("toolkit[")]
    if beyond_bounds:
        reqs = [re.sub(r",?\s*<[^,;\"]+", "", r) for r in reqs]
    return sorted(set(reqs))


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--beyond-bounds", action="store_true", help="drop pyproject's upper bounds")
    ap.add_argument("--tests", nargs="*", default=DEFAULT_TESTS, help="pytest paths to run in the scratch venv")
    ap.add_argument("--keep", action="store_true", help="keep the scratch venv (its path is printed)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="toolkit-newest-"))
    venv, py = tmp / "venv", tmp / "venv" / "bin" / "python"
    results: list[tuple[str, bool, str]] = []
    try:
        sh([sys.executable, "-m", "venv", str(venv)], check=True)
        reqs = requirements(args.beyond_bounds)
        t = time.monotonic()
        r = sh([str(py), "-m", "pip", "install", "-q", "--upgrade", "pip", "setuptools", *reqs])
        if r.returncode != 0:
            print(f"install failed:\n{r.stderr[-3000:]}")
            return 1
        sh([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(ROOT)], check=True)
        print(f"scratch venv {venv} installed in {time.monotonic() - t:.0f} s "
              f"({'upper bounds dropped' if args.beyond_bounds else 'within pyproject ranges'})")
        now = {re.sub(r"[-_.]+", "-", d["name"]).lower(): d["version"]
               for d in json.loads(sh([str(py), "-m", "pip", "list", "--format", "json"]).stdout)}
        lock = locked()
        moved = sorted((n, lock[n], now.get(n)) for n in lock if now.get(n) != lock[n])
        print(f"\n{len(moved)} of {len(lock)} locked packages resolve to another version now:")
        width = max((len(n) for n, _, _ in moved), default=10)
        for n, was, new in moved:
            print(f"  {n:<{width}}  {was:>14} -> {new or 'absent'}")
        with tempfile.TemporaryDirectory() as res:
            r = sh([str(venv / "bin" / "toolkit"), "bench", "matrix", "envs/matrices/quickstart.yaml", "--results", res,
                    "--json"], cwd=ROOT, timeout=1800)
            try:
                doc = json.loads(r.stdout)
                bad = [f"{c['arm']} {c['domain']} c={c['concurrency']}: {c.get('reason')}"
                       for c in doc["cells"] if c["status"] != "ok"]
            except (json.JSONDecodeError, KeyError):
                bad = [f"exit {r.returncode}: {r.stderr.strip().splitlines()[-1:] or ''}"]
            results.append(("quickstart matrix", r.returncode == 0 and not bad, "; ".join(bad[:3])))
        if args.tests:
            r = sh([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *args.tests], cwd=ROOT, timeout=3600)
            tail = [ln for ln in r.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))][:5]
            summary = (r.stdout.strip().splitlines() or [""])[-1]
            results.append((f"pytest {' '.join(args.tests)}", r.returncode == 0, "; ".join(tail) or summary))
    finally:
        if args.keep:
            print(f"kept: {venv}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print()
    for name, ok, why in results:
        print(f"{'ok    ' if ok else 'BROKEN'}  {name}" + ("" if ok else f": {why}"))
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
