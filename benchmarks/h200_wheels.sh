#!/usr/bin/env bash
# Python 3.12 wheels the lent H200's image lacks (it has torch, transformers, numpy, scipy, aiohttp,
# matplotlib, typer, rich, pyyaml, jinja2, tokenizers), fetched HERE into .whl/ (git-ignored), then
# carried by the device tool (`carry: [".whl"]`) and installed there with --no-index --target /tmp/site.
#   bash benchmarks/h200_wheels.sh            # ~10 MB
# Versions: those of this repo's venv; `transformers serve` needs the serving set (issue 9 lists it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
PKGS=(
  # the toolkit itself
  pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  typing_extensions==4.16.0 typer==0.29.2 click==8.4.2 docker==7.2.0 ruamel.yaml==0.19.1  # bench tune --out
  # transformers serve
  fastapi==0.165.0 starlette==1.10.0 uvicorn==0.55.0 annotated-doc==0.0.7 opentelemetry-api==1.45.2
  importlib_metadata==10.2.0 openai==3.57.0 httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5
  jiter==0.19.0 distro==1.9.0 sniffio==1.3.1
)
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${PKGS[@]}" 2>&1 | grep -v "^WARNING: Location" || true
ls .whl | wc -l
du -sh .whl
