"""Run playbooks/site.yml against a Hosts spec through ansible-runner, and turn its events into data.

    result = provision(load_spec("envs/hosts/blackwell.yaml"), check=True, on_event=print)
    result.ok, result.hosts["gpu-01"].changed, result.failures, result.skips, result.run_dir

Each run gets its own folder (private data dir) under runs_dir() ($TOOLKIT_RUNS_DIR, default
~/.cache/toolkit/provision): inventory.yml, extravars.json, artifacts/<ident>/ (ansible-runner's stdout,
job_events/, status, rc, command) scrubbed of secrets, hosts/<host>.json (fingerprints), result.json and
SHA256SUMS.
"""

from __future__ import annotations

import fnmatch
import os
import secrets
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from toolkit.errors import ToolFailure, ToolkitError
from toolkit.fsutil import write_json
from toolkit.provision.fingerprint import fingerprint_dir, fingerprint_path
from toolkit.provision.inventory import check_keys, render_inventory
from toolkit.resources import data_dir
from toolkit.scrub import scrub_run_dir
from toolkit.settings import HOSTS_DIR_VAR, settings
from toolkit.specs import LoadedSpec

FINGERPRINT_TASK = "Write the fingerprint on the controller"  # the facts role's last task
HOST_EVENTS = {"runner_on_ok": "ok", "runner_on_failed": "failed", "runner_on_unreachable": "unreachable",
               "runner_on_skipped": "skipped"}


def runs_dir() -> Path:
    return settings().runs_dir


def known_hosts_file() -> Path:
    """SSH host keys are checked (new hosts accepted once, changed keys refused); tests point this elsewhere."""
    return settings().known_hosts


@dataclass
class HostRecap:
    host: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    rescued: int = 0
    ignored: int = 0

    @property
    def status(self) -> str:
        return "unreachable" if self.unreachable else "failed" if self.failed else \
            "changed" if self.changed else "ok" if self.ok else "not run"


@dataclass
class Failure:
    host: str
    task: str
    message: str
    unreachable: bool = False


@dataclass
class SkipNotice:
    host: str
    role: str
    steps: list[str]
    reason: str


@dataclass
class Event:
    """One progress event: a task started (host None) or a host finished a task."""
    kind: str  # task | ok | changed | failed | unreachable | skipped
    task: str
    host: str | None = None
    message: str = ""
    diff: str = ""  # unified diff of what changed (or would change, with --check)


@dataclass
class ProvisionResult:
    run_id: str
    run_dir: Path
    spec: str
    check: bool
    limit: str | None
    tags: str | None
    rc: int
    status: str
    hosts: dict[str, HostRecap] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    skips: list[SkipNotice] = field(default_factory=list)
    fingerprints: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.failures and self.error is None

    def to_dict(self) -> dict:  # json-edge: result.json / --json
        d = asdict(self)
        d["run_dir"] = str(self.run_dir)
        d["ok"] = self.ok
        d["hosts"] = {h: {**asdict(r), "status": r.status} for h, r in self.hosts.items()}
        return d


class _Collector:
    """ansible-runner event handler: keeps what the recap needs and forwards progress events.
    Returns True so that runner keeps every event (a falsy return drops it and its stats)."""

    def __init__(self, on_event: Callable[[Event], None] | None):
        self.on_event = on_event or (lambda e: None)
        self.task = ""
        self.failures: list[Failure] = []
        self.skips: list[SkipNotice] = []
        self.fingerprinted: set[str] = set()  # hosts whose facts role wrote (or confirmed) the fingerprint

    def __call__(self, ev: dict) -> bool:
        kind, data = ev.get("event"), ev.get("event_data") or {}
        if kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            role = data.get("role")
            self.task = f"{role} : {data.get('task', '')}" if role else data.get("task", "")
            self.on_event(Event("task", self.task))
        elif kind in HOST_EVENTS:
            host, res = data.get("host", "?"), data.get("res") or {}
            status = HOST_EVENTS[kind]
            message = ""
            if status == "ok":
                msg = res.get("msg")
                if isinstance(msg, dict) and isinstance(msg.get("toolkit_skip"), dict):
                    s = msg["toolkit_skip"]
                    self.skips.append(SkipNotice(host, str(s.get("role", "?")), [str(x) for x in s.get("steps", [])],
                                                 str(s.get("reason", ""))))
                if res.get("changed"):
                    status = "changed"
                if self.task == f"facts : {FINGERPRINT_TASK}":
                    self.fingerprinted.add(host)
            elif status in ("failed", "unreachable") and not data.get("ignore_errors"):
                message = _failure_message(res)
                self.failures.append(Failure(host, self.task, message, unreachable=status == "unreachable"))
            diff = ""
            if status == "changed":  # a loop keeps each item's diff in results
                items = [r.get("diff") for r in res.get("results") or [] if isinstance(r, dict) and r.get("changed")]
                diff = _diff_text(res.get("diff") or items)
            self.on_event(Event(status, self.task, host, message, diff))
        return True


def _diff_text(diff, max_lines: int = 60) -> str:
    """Ansible's diff results ({before, after, before_header, after_header}, or a list) as a unified diff."""
    import difflib

    out: list[str] = []
    flat: list = []
    for d in diff if isinstance(diff, list) else [diff]:
        flat += d if isinstance(d, list) else [d]
    for d in (d for d in flat if isinstance(d, dict)):
        if "prepared" in d:
            out += str(d["prepared"]).splitlines()
        before, after = d.get("before", ""), d.get("after", "")
        if isinstance(before, dict) and isinstance(after, dict):  # file attributes: state, mode, owner
            path = after.get("path") or before.get("path") or ""
            out += [f"{path}: {k}: {before.get(k)} -> {after.get(k)}" for k in sorted(set(before) | set(after))
                    if k != "path" and before.get(k) != after.get(k)]
            continue
        if not isinstance(before, str) or not isinstance(after, str) or before == after:
            continue
        out += list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="",
                                         fromfile=str(d.get("before_header", "before")),
                                         tofile=str(d.get("after_header", "after"))))
    if len(out) > max_lines:
        out = out[:max_lines] + [f"... ({len(out) - max_lines} more lines in the run's artifacts)"]
    return "\n".join(out)


def _failure_message(res: dict) -> str:
    parts = [str(res.get("msg") or "").strip()]
    for key in ("stderr", "module_stderr", "stdout"):
        text = str(res.get(key) or "").strip()
        if text and text not in parts[0]:
            parts.append(text.splitlines()[-1][:300] if key == "stdout" else "\n".join(text.splitlines()[-5:]))
            break
    if not parts[0] and "results" in res:  # a loop: the first failed item
        failed = [r for r in res["results"] if isinstance(r, dict) and r.get("failed")]
        if failed:
            return _failure_message(failed[0])
    return "\n".join(p for p in parts if p) or f"failed (rc {res.get('rc', '?')})"


def select_hosts(spec: LoadedSpec, limit: str | None) -> list[str]:
    """Host names a --limit selects (names, groups, globs; comma-separated). Unknown plain names are errors."""
    names = list(spec.model.hosts)
    if not limit:
        return names
    chosen: list[str] = []
    for pat in (p.strip() for p in limit.split(",") if p.strip()):
        found = [n for n in names if fnmatch.fnmatchcase(n, pat)] or list(spec.model.group(pat))
        if not found:
            import difflib

            close = difflib.get_close_matches(pat, names + sorted({g for h in spec.model.hosts.values()
                                                                   for g in h.groups}), n=1)
            raise ToolkitError(f"--limit {pat!r} matches no host or group of {spec.path}",
                               hint=f"did you mean {close[0]!r}?" if close else f"hosts: {', '.join(names)}")
        chosen += [n for n in found if n not in chosen]
    return chosen


def check_tags(tags: str | None) -> None:
    """--tags must name a role of site.yml (or `gpu`): Ansible itself would silently run nothing."""
    if not tags:
        return
    known = sorted({p.name for p in (data_dir("playbooks") / "roles").iterdir() if p.is_dir()} | {"gpu"})
    for tag in (t.strip() for t in tags.split(",") if t.strip()):
        if tag not in known:
            import difflib

            close = difflib.get_close_matches(tag, known, n=1)
            raise ToolkitError(f"--tags {tag!r} is not a role of playbooks/site.yml",
                               hint=f"did you mean {close[0]!r}?" if close else f"tags: {', '.join(known)}")


def new_run_dir(name: str, check: bool) -> tuple[str, Path]:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    run_id = f"{stamp}-{name}{'-check' if check else ''}-{secrets.token_hex(2)}"
    d = runs_dir() / run_id
    d.mkdir(parents=True, exist_ok=False)
    return run_id, d


def provision(spec: LoadedSpec, *, limit: str | None = None, check: bool = False, tags: str | None = None,
              forks: int | None = None, on_event: Callable[[Event], None] | None = None) -> ProvisionResult:
    """Render the inventory, run site.yml with ansible-runner, collect the recap. Never raises for a
    failing host: the result names it (other hosts go on). Raises ToolkitError for bad input."""
    from toolkit.extras import require_module, require_tool

    ansible_runner = require_module("ansible_runner", "provision", "toolkit provision")
    playbooks = data_dir("playbooks")
    if not (playbooks / "site.yml").is_file():
        raise ToolkitError(f"playbooks/site.yml is missing from {playbooks}",
                           hint="reinstall the toolkit: its wheel carries the playbooks")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    require_tool("ansible-playbook", "provision", "toolkit provision", path=path)
    check_tags(tags)
    inv = render_inventory(spec)
    selected = select_hosts(spec, limit)
    check_keys(spec, inv, selected)
    run_id, run_dir = new_run_dir(inv.name, check)
    inventory = inv.write(run_dir / "inventory.yml")
    facts_dir = fingerprint_dir()
    facts_dir.mkdir(parents=True, exist_ok=True)
    extravars = {"facts_dir": str(facts_dir), "sglang_host_controller_dir": str(run_dir)}
    write_json(run_dir / "extravars.json", extravars)
    known_hosts = known_hosts_file()
    known_hosts.parent.mkdir(parents=True, exist_ok=True)
    (run_dir / "tmp").mkdir()
    envvars = {
        "PATH": path,
        "ANSIBLE_ROLES_PATH": str(playbooks / "roles"),
        "ANSIBLE_SSH_ARGS": f"-o ControlMaster=auto -o ControlPersist=60s -o ConnectTimeout=10 "
                            f"-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile={known_hosts}",
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "True",
        "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
        "ANSIBLE_LOCAL_TEMP": str(run_dir / "tmp"),
        "ANSIBLE_TIMEOUT": "20",
        HOSTS_DIR_VAR: str(facts_dir),
    }
    collector = _Collector(on_event)
    t0 = time.monotonic()
    runner = ansible_runner.run(
        private_data_dir=str(run_dir), playbook=str(playbooks / "site.yml"), inventory=str(inventory),
        extravars=extravars, envvars=envvars, cmdline="--check --diff" if check else None,
        limit=",".join(selected) if limit else None, tags=tags or None,
        forks=forks or max(1, min(len(selected), 16)), suppress_env_files=True, quiet=True,
        event_handler=collector, ident="ansible",
    )
    result = ProvisionResult(run_id=run_id, run_dir=run_dir, spec=str(spec.path), check=check, limit=limit,
                             tags=tags, rc=int(runner.rc if runner.rc is not None else -1), status=runner.status,
                             failures=collector.failures, skips=collector.skips,
                             elapsed_s=round(time.monotonic() - t0, 1))
    stats = runner.stats or {}
    for host in selected:
        result.hosts[host] = HostRecap(
            host, ok=stats.get("ok", {}).get(host, 0), changed=stats.get("changed", {}).get(host, 0),
            failed=stats.get("failures", {}).get(host, 0), unreachable=stats.get("dark", {}).get(host, 0),
            skipped=stats.get("skipped", {}).get(host, 0), rescued=stats.get("rescued", {}).get(host, 0),
            ignored=stats.get("ignored", {}).get(host, 0))
    if not stats:
        result.error = _no_stats_error(runner, run_dir)
    if not check:
        for host in sorted(collector.fingerprinted):
            fp = fingerprint_path(host)
            if fp.is_file():
                (run_dir / "hosts").mkdir(exist_ok=True)
                (run_dir / "hosts" / fp.name).write_bytes(fp.read_bytes())
                result.fingerprints[host] = str(fp)
    scrub_run_dir(run_dir, {**os.environ, **envvars})
    write_json(run_dir / "result.json", result.to_dict())
    from toolkit.checksums import write_sums

    write_sums(run_dir)  # the kept folder, as scrubbed: `sha256sum -c SHA256SUMS` names a later edit
    return result


def _no_stats_error(runner, run_dir: Path) -> str:
    """ansible-playbook stopped before any play ran (bad inventory, syntax error): show its last lines."""
    try:
        tail = "\n".join(runner.stdout.read().strip().splitlines()[-12:])
    except Exception:  # noqa: BLE001 - the stdout file may be missing when the process never started
        tail = ""
    return f"ansible-playbook ended with status {runner.status} (rc {runner.rc}) before any play ran" + \
        (f":\n{tail}" if tail else f"; see {run_dir}/artifacts")


def raise_for_result(result: ProvisionResult) -> None:
    """A ToolFailure (exit 1) that names each failing host, its task and its message."""
    if result.ok:
        return
    lines = []
    for f in result.failures:
        what = "UNREACHABLE" if f.unreachable else "FAILED"
        lines.append(f"{what} {f.host}: task [{f.task}]: {f.message}")
    if result.error:
        lines.append(result.error)
    if not lines:
        lines.append(f"ansible-playbook exited with rc {result.rc}")
    raise ToolFailure("provisioning failed:\n  " + "\n  ".join("\n    ".join(l.splitlines()) for l in lines),
                      hint=f"artifacts: {result.run_dir}/artifacts (stdout, job_events)")
