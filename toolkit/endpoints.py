"""How to reach a server the toolkit does not run: TLS (the system trust store, or a CA bundle the spec
names) and an API key read from an environment variable the spec names, sent as a Bearer header.

    ep = Endpoint("https://gw.example:8443", ca_bundle=Path("ca.pem"), api_key_env="OPENAI_API_KEY")
    register(ep.with_key_from_env())   # once, before a run: the load generator and health polls find it
    lookup("https://gw.example:8443/v1/models")     # -> ep (the longest registered base URL that prefixes it)

The key lives in this process's memory only. It is never part of a spec (only the variable's name is),
never in `repr`, and `redact()` masks it in any text (an error body that echoes the header) before
that text can reach an archive, a log or a report.
"""

from __future__ import annotations

import os
import re
import ssl
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from toolkit.errors import ToolkitError

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MASK = "***"


@dataclass(frozen=True)
class Endpoint:
    url: str                                  # base URL, no trailing slash
    ca_bundle: Path | None = None             # PEM file; None: the system trust store
    api_key_env: str | None = None            # the variable's name (recorded); never its value
    api_key: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", self.url.rstrip("/"))

    @property
    def tls(self) -> bool:
        return urlsplit(self.url).scheme == "https"

    def with_key_from_env(self, environ: dict | None = None) -> "Endpoint":
        """This endpoint with its key read from `api_key_env` (a ToolkitError naming the variable when unset)."""
        if not self.api_key_env:
            return self
        value = (os.environ if environ is None else environ).get(self.api_key_env, "")
        if not value.strip():
            raise ToolkitError(f"environment variable {self.api_key_env} is not set: it holds the API key for "
                               f"{self.url} (api_key_env: {self.api_key_env})",
                               hint=f"export {self.api_key_env}=<key> before the run; the key itself never "
                                    "goes in a spec")
        return replace(self, api_key=value.strip())

    def ssl_context(self) -> ssl.SSLContext | None:
        """A verifying client context for https:// (None for http://)."""
        if not self.tls:
            return None
        return client_ssl_context(self.ca_bundle)

    def headers(self) -> dict[str, str]:  # data-keyed: HTTP header names
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def recorded(self) -> "EndpointRecord":
        """What an archive may record: the scheme, the CA bundle's path, the variable's name; never the key."""
        return EndpointRecord(self.tls, str(self.ca_bundle) if self.ca_bundle else None, self.api_key_env)


class EndpointRecord(NamedTuple):
    """An endpoint as an arm's facts name it (Endpoint.recorded)."""

    tls: bool
    ca_bundle: str | None
    api_key_env: str | None


_CONTEXTS: dict[str, ssl.SSLContext] = {}
_LOCK = threading.Lock()
_REGISTRY: dict[str, Endpoint] = {}


def client_ssl_context(ca_bundle: Path | None = None) -> ssl.SSLContext:
    """Certificate and host name checked; the system trust store, or only `ca_bundle` when given. One
    context per bundle, shared by every connection (the context caches sessions)."""
    key = str(ca_bundle or "")
    with _LOCK:
        ctx = _CONTEXTS.get(key)
        if ctx is None:
            try:
                ctx = ssl.create_default_context(cafile=str(ca_bundle) if ca_bundle else None)
            except (OSError, ssl.SSLError) as exc:
                raise ToolkitError(f"cannot load the CA bundle {ca_bundle}: {exc}",
                                   hint="give a PEM file of CA certificates (e.g. the gateway's issuing CA)") from None
            ctx.set_alpn_protocols(["http/1.1"])
            _CONTEXTS[key] = ctx
    return ctx


def register(ep: Endpoint) -> Endpoint:
    with _LOCK:
        _REGISTRY[ep.url] = ep
    return ep


def unregister(url: str) -> None:
    with _LOCK:
        _REGISTRY.pop(url.rstrip("/"), None)


def lookup(url: str) -> Endpoint | None:
    """The registered endpoint whose base URL is the longest prefix of `url` (on a path boundary)."""
    url = url.rstrip("/")
    best = None
    with _LOCK:
        for base, ep in _REGISTRY.items():
            if (url == base or url.startswith(base + "/") or url.startswith(base + "?")) and \
                    (best is None or len(base) > len(best.url)):
                best = ep
    return best


def redact(text: str) -> str:
    """`text` with every registered API key masked."""
    with _LOCK:
        keys = [ep.api_key for ep in _REGISTRY.values() if ep.api_key]
    for k in keys:
        if k in text:
            text = text.replace(k, MASK)
    return text
