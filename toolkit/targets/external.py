"""Target kind `external`: servers someone else started, one base URL per arm. Its URLs are registered with
toolkit.endpoints before the run: https:// verified against the system trust store or the spec's `ca_bundle`,
and the key from the variable `api_key_env` names, sent as a Bearer header by the load generator and the
health polls. An unset variable is an error naming it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

from toolkit import endpoints
from toolkit.errors import ToolkitError
from toolkit.schema.manifest import Hardware, TargetRecord
from toolkit.targets.base import LaunchArgs, Slot, Target, TargetSpec


@dataclass(frozen=True)
class ExternalTarget:
    """Servers someone else started: one base URL per arm."""

    urls: dict[str, str] = field(default_factory=dict)
    kind: ClassVar[str] = "external"

    def record(self) -> TargetRecord:
        return TargetRecord(kind="external", urls=dict(self.urls))


def external_endpoints(plan, keys: bool = True) -> list[endpoints.Endpoint]:
    """The endpoints of the plan's URLs, keys read from the environment (not registered; `keys=False`: not read,
    for `toolkit validate`, which may run where the run's secrets are not set); none for another kind."""
    t = plan.m.target
    if t.kind != External.kind:
        return []
    ca = plan.paths.ca_bundle
    urls = sorted({*([t.url] if t.url else []), *t.urls.values()})
    out = []
    for url in urls:
        ep = endpoints.Endpoint(url, ca_bundle=ca if url.startswith("https://") else None, api_key_env=t.api_key_env)
        try:
            ep = ep.with_key_from_env() if keys else ep
        except ToolkitError as exc:
            raise plan.spec.error(("target", "api_key_env"), exc.message, exc.hint) from None
        if ep.tls:
            ep.ssl_context()  # a CA bundle that does not load fails here, before the run
        out.append(ep)
    return out


class External(Target):
    kind = "external"
    starts_servers = False

    def slots(self, spec, engine: str | None, hosts_spec) -> list[Slot]:
        """One slot per host of the URLs (one machine), or per URL when the spec says they are `independent`."""
        m = spec.model
        t = m.target
        if not t.urls:
            host = urlsplit(t.url).hostname or t.url
            return [Slot("external", ExternalTarget({a: t.url for a in m.arm_names}), list(m.arm_names),
                         hardware=Hardware(host=host, gpus="all"))]
        missing = [a for a in m.arm_names if a not in t.urls]
        if missing:
            raise spec.error(("target", "urls"), f"no URL for arm(s) {missing}", hint="give every arm a URL")
        slots_by: dict[str, Slot] = {}
        for arm in m.arm_names:
            url = t.urls[arm]
            host = urlsplit(url).hostname or url
            key = url if t.independent else host  # one host is one machine unless the spec says otherwise
            slot = slots_by.setdefault(key, Slot(f"external-{arm}" if t.independent else f"external-{host}",
                                                 ExternalTarget(), hardware=Hardware(host=key, gpus="all")))
            slot.target.urls[arm] = url
            slot.arms.append(arm)
        return list(slots_by.values())

    def preflight(self, plan) -> list:
        """Its URLs registered (keys, CA bundles); nothing else runs here."""
        return [endpoints.register(ep) for ep in external_endpoints(plan)]

    def from_option(self, text: str) -> TargetSpec | None:
        return TargetSpec(kind="external", url=text) if text.startswith(("http://", "https://")) else None

    def endpoints(self, plan, keys: bool = True) -> list:
        return external_endpoints(plan, keys)

    def serving(self, urls: dict[str, str]) -> TargetSpec | None:
        return TargetSpec(kind=self.kind, urls=dict(urls))

    def for_arms(self, target: TargetSpec, arms: dict[str, str]) -> TargetSpec:
        """Each new arm sent to its original arm's URL (`urls`, else the one `url`)."""
        urls = {new: target.urls.get(old, target.url) for new, old in arms.items()}
        return target.model_copy(update={"url": None, "urls": urls})

    def launcher_kwargs(self, plan, slot: Slot, arm: str, log_dir: Path) -> LaunchArgs:
        return LaunchArgs(Path(log_dir) / f"{arm}.log", kind="external", url=slot.target.urls[arm])

    def served_urls(self, slot: Slot) -> dict[str, str]:  # data-keyed: arm
        return dict(slot.target.urls)


TARGET = External()
