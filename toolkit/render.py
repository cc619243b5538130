"""Render specs through Jinja2 templates (templates/) into files: deterministic, StrictUndefined,
and every value that lands in a shell line passes through the `sh` (shell-quote) filter.

The templates are read through toolkit.resources: the wheel's package data, or the repository's folder."""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from toolkit import __version__
from toolkit.errors import SpecError, ToolkitError
from toolkit.fsutil import write_atomic
from toolkit.patches import read_patch
from toolkit.resources import ENGINE_TEMPLATES, data_dir
from toolkit import engines
from toolkit.specs import LoadedSpec, check_patch_hashes, referenced_files, sha256_file, spec_hash
from toolkit.specs.environment import Environment


def _sh(value: Any) -> str:
    return shlex.quote(str(value))


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _docker_env(value: Any) -> str:
    """A value for ENV/LABEL/ARG lines: JSON string quoting is valid Dockerfile quoting."""
    return json.dumps(str(value))


def jinja_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["sh"] = _sh
    env.filters["tojson_sorted"] = _json
    env.filters["dq"] = _docker_env
    return env


def template_version() -> str:
    """Hash of every template file: part of each spec hash, so a template change invalidates caches. Not the
    Slurm job scripts' (templates/slurm/): they build no image and start no differently configured server,
    and each run archives the scripts it submitted, so a change there must not miss every cached image. Not
    one engine's own (templates/engines/NAME/): those are hashed into that engine's Environments alone
    (toolkit.specs.spec_hash)."""
    h = hashlib.sha256()
    templates = data_dir("templates")
    for f in sorted(templates.rglob("*")):
        if f.is_file() and f.relative_to(templates).parts[0] not in ("slurm", ENGINE_TEMPLATES):
            h.update(f.relative_to(templates).as_posix().encode() + b"\0")
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


@dataclass
class Rendered:
    """A rendered environment: the Dockerfile, the build context files and the lock manifest."""

    spec: LoadedSpec
    hash: str
    dockerfile: str | None
    context_files: dict[str, Path] = field(default_factory=dict)  # name in build context -> source file
    lock: dict = field(default_factory=dict)

    def write(self, out_dir: Path) -> list[Path]:
        if out_dir.exists() and not out_dir.is_dir():
            raise ToolkitError(f"{out_dir} is a file: -o names the folder the Dockerfile, its build context and "
                               "toolkit.lock.json are written to", hint="give a folder (new, or one to overwrite "
                               "those files in); the file was left as it is")
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ToolkitError(f"cannot make the output folder {out_dir}: {exc.strerror or exc}",
                               hint="a part of the path is a file, or not writable: give another -o") from None
        written = []
        if self.dockerfile is not None:
            written.append(write_atomic(out_dir / "Dockerfile", self.dockerfile))
            for name, src in sorted(self.context_files.items()):
                written.append(write_atomic(out_dir / name, src.read_bytes()))
        written.append(write_atomic(out_dir / "toolkit.lock.json",
                                    json.dumps(self.lock, indent=2, sort_keys=True) + "\n"))
        return written


def pip_install_line(pkg) -> str:
    parts = ["python", "-m", "pip", "install", "--no-cache-dir"]
    if pkg.no_deps:
        parts.append("--no-deps")
    if pkg.index_url:
        parts += ["--index-url", pkg.index_url]
    if pkg.extra_index_url:
        parts += ["--extra-index-url", pkg.extra_index_url]
    parts.append(f"{pkg.name}=={pkg.version}")
    return " ".join(_sh(p) for p in parts)


def render_env(spec: LoadedSpec) -> Rendered:
    env: Environment = spec.model
    if not isinstance(env, Environment):
        raise SpecError(f"render env needs an Environment spec, {spec.path} is a {spec.kind}", file=spec.path)
    patch_hashes = check_patch_hashes(spec)
    tv = template_version()
    h = spec_hash(spec, tv)
    files = referenced_files(spec)
    context: dict[str, Path] = {}
    patches = []
    if env.sglang:
        for i, p in enumerate(env.sglang.patches):
            src = files[f"sglang.patches[{i}]"]
            info = read_patch(src)
            name = f"patches/{i + 1:02d}-{src.name}"
            context[name] = src
            patches.append({"name": name, "strip": info.strip, "files": list(info.files), "fuzz": p.fuzz,
                            "sha256": patch_hashes[p.path], "spec_path": p.path, "layout": info.layout})
    ca = None
    if env.ca_bundle:
        context["toolkit-build-ca.crt"] = files["ca_bundle"]
        ca = {"name": "toolkit-build-ca.crt", "keep": env.ca_bundle.keep}
    lock = {
        "toolkit_version": __version__,
        "template_version": tv,
        "spec_hash": h,
        "spec": {"name": env.name, "kind": env.kind, "files": [str(f) for f in spec.files]},
        "resolved": env.model_dump(mode="json"),
        "referenced_files": {k: {"path": str(v), "sha256": sha256_file(v)} for k, v in sorted(files.items())},
        "patches": patches,
        "warnings": list(spec.warnings),
    }
    dockerfile = None
    eng = engines.get(env.engine)
    if eng.builds_image:
        if env.base_image is None:  # an engine that also runs without an image (vllm as a process)
            raise spec.error(("engine",), f"an image of engine {eng.name!r} is built on `base_image`, and this "
                             "environment names none", hint="add `base_image: nvidia/cuda:13.0.1-devel-ubuntu24.04` "
                             "(pinned with @sha256:... once it is pulled) and `cuda: \"13.0\"`")
        dockerfile = jinja_env().get_template(eng.image_template).render(
            env=env, spec_hash=h, toolkit_version=__version__, patches=patches, ca=ca,
            pip_lines=[pip_install_line(p) for p in env.packages],
            sglang_req=_sglang_requirement(env) if env.sglang else None,
            labels=_static_labels(env, h, patches, eng.name, eng.pinned_version(env) or ""),
        )
    return Rendered(spec=spec, hash=h, dockerfile=dockerfile, context_files=context, lock=lock)


def _sglang_requirement(env: Environment) -> str:
    sg = env.sglang
    extras = f"[{','.join(sg.extras)}]" if sg.extras else ""
    if sg.source == "git":
        ref = sg.git_ref or f"v{sg.version}"
        return f"sglang{extras} @ git+{sg.git_url}@{ref}#subdirectory=python"
    return f"sglang{extras}=={sg.version}"


# data-keyed: image label names
def _static_labels(env: Environment, h: str, patches: list[dict], engine: str, version: str) -> dict[str, str]:
    """Labels that follow from the spec alone; time and git revision are added at build time. `version`: the
    engine's pinned version (`dev.toolkit.<engine>-version`)."""
    ref, _, digest = (env.base_image or "").partition("@")
    labels = {
        "org.opencontainers.image.title": env.name,
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.base.name": ref,
        "dev.toolkit.spec-hash": h,
        "dev.toolkit.spec-name": env.name,
        f"dev.toolkit.{engine}-version": version,
        "dev.toolkit.cuda": env.cuda or "",
    }
    if digest:
        labels["org.opencontainers.image.base.digest"] = digest
    for i, p in enumerate(patches):
        labels[f"dev.toolkit.patch.{i + 1}"] = f"{Path(p['spec_path']).name} sha256:{p['sha256']}"
        if p["fuzz"]:  # a patch allowed to apply with fuzz says so on the image
            labels[f"dev.toolkit.patch.{i + 1}.fuzz"] = str(p["fuzz"])
    return labels
