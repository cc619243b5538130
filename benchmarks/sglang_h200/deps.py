"""Which of the toolkit's own dependencies (pyproject.toml) this Python lacks, and what each missing one stops.

The GPU machine has torch and little else; the SGLang wheel set brings most of the toolkit's needs, not all. Two
sittings lost work to one found missing after minutes (ruamel.yaml: `bench tune --out`, 2026-12-04 and 2026-12-07;
pydantic for `toolkit.pair`, 2026-12-07): setup.sh prints this first, and an unpack call can run it alone.
    PYTHONPATH=/tmp/site python3 benchmarks/sglang_h200/deps.py
"""
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

STOPS = {"ruamel.yaml": "bench tune --out (the write-back; carry its wheel in .whl/)",
         "matplotlib": "the reports' plots", "pydantic": "everything (toolkit.pair's training included)",
         "scipy": "the statistics", "numpy": "everything"}

root = Path(__file__).resolve().parents[2]
deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
missing = []
for dep in deps:
    name = re.split(r"[<>=!~;\[ ]", dep, maxsplit=1)[0]
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        missing.append(name)
for name in missing:
    print(f"missing here: {name}: stops {STOPS.get(name, 'what imports it')}")
print("the toolkit's own dependencies:", "all here" if not missing else f"{len(missing)} of {len(deps)} missing")
sys.exit(1 if missing else 0)
