"""A local base image from debootstrap + `docker import`, for machines that reach no image registry
(air-gapped hosts, CI). `ensure_base_image` is cached: an existing tag is reused as is.

    toolkit build base                     # toolkit/base:bookworm from this machine's apt mirror
    toolkit build base --suite trixie --mirror http://deb.debian.org/debian
"""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from toolkit.docker_api import local_image_id
from toolkit.errors import ToolFailure, ToolkitError
from toolkit.settings import cache_dir

DEFAULT_NAME = "toolkit/base:bookworm"
FALLBACK_MIRROR = "http://deb.debian.org/debian"
SOURCES = Path("/etc/apt/sources.list")
SOURCES_D = Path("/etc/apt/sources.list.d")


def _mirrors_from(text: str, deb822: bool) -> list[tuple[str, list[str]]]:
    """(uri, suites) pairs of the `deb` (binary) entries in one sources file."""
    found = []
    if deb822:
        for stanza in re.split(r"\n\s*\n", text):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line:
                    continue
                k, _, v = line.partition(":")
                fields[k.strip().lower()] = v.strip()
            if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes").lower() != "no":
                for uri in fields.get("uris", "").split():
                    found.append((uri, fields.get("suites", "").split()))
    else:
        for line in text.splitlines():
            parts = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
            if len(parts) >= 3 and parts[0] == "deb":
                found.append((parts[1], [parts[2]]))
    return found


def apt_mirror(suite: str = "bookworm") -> str:
    """The Debian mirror this machine's apt uses for `suite` (else the first Debian one, else deb.debian.org)."""
    entries: list[tuple[str, list[str]]] = []
    files = [SOURCES] if SOURCES.is_file() else []
    files += sorted(SOURCES_D.glob("*.list")) + sorted(SOURCES_D.glob("*.sources")) if SOURCES_D.is_dir() else []
    for f in files:
        try:
            entries += _mirrors_from(f.read_text(errors="replace"), deb822=f.suffix == ".sources")
        except OSError:
            continue
    debian = [(u, s) for u, s in entries if u.startswith(("http://", "https://", "file:/"))
              and "security" not in u]
    for uri, suites in debian:
        if suite in suites:
            return uri
    return debian[0][0] if debian else FALLBACK_MIRROR


def ensure_base_image(client, name: str = DEFAULT_NAME, suite: str = "bookworm", mirror: str | None = None,
                      rebuild: bool = False, log=None) -> str:
    """Return the id of the local image `name`, making it first with debootstrap when it is missing.

    The image is a `--variant=minbase` root file system (apt, bash, coreutils; no Python) imported
    with `docker import`; its apt sources point at `mirror`. A file lock serialises concurrent
    callers (parallel test sessions), and the tag check happens under it.
    """
    if not rebuild and (found := local_image_id(client, name)):
        return found
    if shutil.which("debootstrap") is None:
        raise ToolkitError("debootstrap is not installed", hint="apt-get install debootstrap (needs root)")
    mirror = mirror or apt_mirror(suite)
    lock_path = cache_dir() / "base-image.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not rebuild and (found := local_image_id(client, name)):
            return found
        return _make(client, name, suite, mirror, log or (lambda msg: None))


def _make(client, name: str, suite: str, mirror: str, log) -> str:
    repo, _, tag = name.rpartition(":") if ":" in name.split("/")[-1] else (name, "", "latest")
    with tempfile.TemporaryDirectory(prefix="toolkit-base-") as tmp:
        root = Path(tmp) / "root"
        t0 = time.monotonic()
        log(f"debootstrap --variant=minbase {suite} from {mirror}")
        proc = subprocess.run(["debootstrap", "--variant=minbase", suite, str(root), mirror],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            hint = "debootstrap needs root" if "root" in tail.lower() else f"check that {mirror} is reachable"
            raise ToolFailure(f"debootstrap {suite} failed (exit {proc.returncode}):\n{tail}", hint=hint)
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for f in (root / junk).glob("*"):
                if f.is_file():
                    f.unlink()
        log(f"debootstrap done in {time.monotonic() - t0:.0f} s; docker import as {name}")
        tar = Path(tmp) / "root.tar"
        proc = subprocess.run(["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(tar), "."],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise ToolFailure(f"tar of the debootstrap tree failed: {proc.stderr.strip()[-500:]}")
        changes = [
            'CMD ["/bin/bash"]',
            "ENV LANG=C.UTF-8",
            f'LABEL dev.toolkit.base.suite="{suite}" dev.toolkit.base.mirror="{mirror}" '
            f'dev.toolkit.base.made-by="toolkit build base"',
        ]
        client.api.import_image_from_file(str(tar), repository=repo, tag=tag, changes=changes)
    found = local_image_id(client, name)
    if found is None:
        raise ToolFailure(f"docker import reported no error, but image {name} is not there")
    return found
