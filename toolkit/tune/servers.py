"""Where the runs of a session go. Request-level knobs (the embedded engine's generation_config) change
nothing on the server: on a local target whose baseline and arm run the same server, every run of the
session goes to ONE server the session starts (the runs' target is its URL), and the baseline is measured
once more after the trials (`<baseline>-again`, an A/A twin). Server-level knobs (SGLang flags) need a
launch per trial: the runs use the matrix's own target and the runner launches each arm. Request-level
knobs on an external target go to the arm's own URL."""

from __future__ import annotations

import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from toolkit import engines, targets
from toolkit.schema.tune import SharedServer
from toolkit.specs import LoadedSpec
from toolkit.specs.matrix import Target as TargetSpec
from toolkit.tune import specs

SHARED_BY = "every run of this session (request-level knobs)"


def shares_one_server(mspec: LoadedSpec, env_spec: LoadedSpec, arm: str, level: str) -> bool:
    """Do every run's arms go to one server the session starts here? Request-level knobs, on a target whose
    servers run on this machine (the adapter's `runs_here`), the embedded engine, the baseline's preset."""
    m, env = mspec.model, env_spec.model
    return (level == "request" and targets.get(m.target.kind).runs_here and engines.get(env.engine).embedded
            and env.servers[m.baseline_arm] == env.servers[arm])


def again_arm(mspec: LoadedSpec, shared: bool) -> str | None:
    """The baseline once more after the trials (an A/A check and the far side of the bracket): on the
    shared server only, where it costs requests, not a launch."""
    return f"{mspec.model.baseline_arm}-again" if shared else None


class Servers:
    """The target of each run; the shared server started on first use and stopped (its log kept) at the end.
    `previous`: the state's record of a server an interrupted session ran (its port is taken again when
    free); `remember(record)`: called with the record of the server started, before it starts."""

    def __init__(self, mspec: LoadedSpec, env_spec: LoadedSpec, arm: str, *, shared: bool,
                 previous: SharedServer | None, remember: Callable[[SharedServer], None],
                 log: Callable[[str], None]) -> None:
        self.mspec, self.env_spec, self.arm, self.shared = mspec, env_spec, arm, shared
        self.previous, self.remember, self.log = previous, remember, log
        self.server = None

    def target(self, arms: list[str]) -> TargetSpec:
        """The `target:` of a generated matrix whose arms are these."""
        if self.shared:
            url = self._url()
            return targets.serving({a: url for a in arms})
        m = self.mspec.model
        # each run's arm stands for the matrix's arm of that name, else for the tuned arm (a kind that names
        # arms, e.g. URLs someone else serves, sends it to that arm's server: Target.for_arms)
        return targets.get(m.target.kind).for_arms(specs.user_target(self.mspec),
                                                   {a: a if a in m.arm_names else self.arm for a in arms})

    def _url(self) -> str:
        from toolkit.serve import free_port, launcher_for

        if self.server is None:
            old = self.previous.port if self.previous is not None else None
            port = old if old and _port_free(old) else free_port()
            self.server = launcher_for(self.env_spec, self.arm, port=port,
                                       log_path=Path(tempfile.mkdtemp(prefix="toolkit-tune-")) / "server.log")
            record = SharedServer(port=port, command=shlex.join(self.server.command), shared_by=SHARED_BY)
            self.remember(record)
            self.log(f"starting the shared server: {record.command}")
            self.server.start()
            self.server.wait_healthy(timeout_s=600)
        return self.server.base_url

    def stop(self, folder: Path) -> None:
        """Stop the shared server (if one started) and keep its log tail, scrubbed, under logs/ (as the
        runner keeps an arm's); a resumed session's server gets a file of its own."""
        if self.server is None:
            return
        self.server.stop()
        from toolkit.fsutil import write_atomic
        from toolkit.scrub import scrub_text

        tail = self.server.log_tail(400)
        if tail:
            logs = folder / "logs"
            n = len(list(logs.glob("server*.log"))) if logs.is_dir() else 0
            write_atomic(logs / (f"server.{n}.log" if n else "server.log"), scrub_text(tail) + "\n")
        shutil.rmtree(Path(self.server.log_path).parent, ignore_errors=True)


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will: a port in TIME_WAIT is free
        try:
            s.bind(("127.0.0.1", int(port)))
            return True
        except OSError:
            return False
