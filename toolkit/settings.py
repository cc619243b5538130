"""Every folder the toolkit keeps things in and every environment variable it reads: one place.

    TOOLKIT_CACHE_DIR        the cache root; default $XDG_CACHE_HOME/toolkit, else ~/.cache/toolkit
                             (TOOLKIT_CACHE, the old name, still works and prints a deprecation warning)
      builds/                build records (toolkit.image.records), builds/logs/ the full build logs
      sglang/                pinned SGLang wheels and source (preflight), git checkouts
      parser-deps/           light packages that let SGLang's own flag parser import
      models/                dummy models made for transformers environments
      genconfig/             what the installed transformers said of generation_config keys and values
                             (toolkit/specs/genconfig.py), so a spec is checked without importing it
      resources/<version>/   templates and playbooks copied out of a zipped install
      centroids-*.npy        the embedding classifier's centroids
      base-image.lock        one base-image build at a time
      active-runs/           one file per matrix run in progress (pid, run): a cell measured while another
                             run is going on the host is marked busy-host (toolkit/bench/hostload.py)
      jit/<gpu>/<env-hash>/  SGLang's compile and JIT caches, kept between launches (toolkit/serve/jitcache.py)
      slurm/                 a Slurm target's job scripts, job logs and endpoint files, unless its `workdir:`
    TOOLKIT_JIT_CACHE        `off`: SGLang servers keep their caches where each library puts them (default on)
    TOOLKIT_SLURM_ORPHAN_S   a Slurm job the toolkit submitted ends itself after this many seconds without a
                             heartbeat from it (a toolkit killed with -9 cannot cancel it; default 300)
    TOOLKIT_HOSTS_DIR        host fingerprints (default <cache>/hosts)
    TOOLKIT_RUNS_DIR         provisioning run folders (default <cache>/provision)
    TOOLKIT_SSH_KNOWN_HOSTS  known_hosts for provisioning (default ~/.ssh/known_hosts)
    TOOLKIT_GIT_REVISION     the commit a copy without .git came from (default: asked from git)
    TOOLKIT_EVENT_LOOP       `asyncio` forces the standard event loop (default: uvloop when installed)
    DOCKER_HOST              the Docker engine (default unix:///var/run/docker.sock)
    NO_COLOR                 plain terminal output

Read at call time (`settings()`), never cached at import: a test or a subprocess that sets a variable
sees its effect.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

CACHE_VAR = "TOOLKIT_CACHE_DIR"
HOSTS_DIR_VAR = "TOOLKIT_HOSTS_DIR"  # also handed to the provisioning playbook, which writes fingerprints there
DEPRECATED = {"TOOLKIT_CACHE": CACHE_VAR}  # old name -> the name to use
_warned: set[str] = set()


def _path(value: str) -> Path:
    return Path(value).expanduser()


def _deprecated(env: Mapping[str, str], old: str) -> str | None:
    value = env.get(old)
    if value and old not in _warned:
        _warned.add(old)
        print(f"warning: {old} is deprecated; set {DEPRECATED[old]} instead", file=sys.stderr)
    return value or None


@dataclass(frozen=True)
class Settings:
    cache_dir: Path
    hosts_dir: Path
    runs_dir: Path
    known_hosts: Path
    git_revision: str | None
    event_loop: str | None
    docker_host: str
    no_color: bool
    jit_cache: bool = True
    slurm_orphan_s: float = 300.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        root = env.get(CACHE_VAR) or _deprecated(env, "TOOLKIT_CACHE")
        if root:
            cache = _path(root)
        else:
            cache = (_path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache") / "toolkit"
        return cls(
            cache_dir=cache,
            hosts_dir=_path(env[HOSTS_DIR_VAR]) if env.get(HOSTS_DIR_VAR) else cache / "hosts",
            runs_dir=_path(env["TOOLKIT_RUNS_DIR"]) if env.get("TOOLKIT_RUNS_DIR") else cache / "provision",
            known_hosts=_path(env.get("TOOLKIT_SSH_KNOWN_HOSTS") or "~/.ssh/known_hosts"),
            git_revision=env.get("TOOLKIT_GIT_REVISION") or None,
            event_loop=env.get("TOOLKIT_EVENT_LOOP") or None,
            docker_host=env.get("DOCKER_HOST") or "unix:///var/run/docker.sock",
            no_color="NO_COLOR" in env,
            jit_cache=(env.get("TOOLKIT_JIT_CACHE") or "on").strip().lower() not in ("off", "0", "false", "no"),
            slurm_orphan_s=_seconds(env, "TOOLKIT_SLURM_ORPHAN_S", 300.0),
        )


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    """A number of seconds > 0 from the environment; anything else is the default (the toolkit starts anyway)."""
    try:
        value = float(env.get(name) or default)
    except ValueError:
        return default
    return value if value > 0 else default


def settings() -> Settings:
    return Settings.from_env()


def cache_dir() -> Path:
    return settings().cache_dir
