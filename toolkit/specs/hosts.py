"""`kind: Hosts`: an inventory of GPU hosts reached over SSH (key *paths* only, never key contents)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from toolkit.errors import SpecValueError, did_you_mean

from toolkit.specs.base import Name, StrictModel


class GPUs(StrictModel):
    model: str = Field(description="expected GPU model, e.g. 'NVIDIA RTX PRO 6000 Blackwell'")
    count: int = Field(ge=0)
    driver_branch: int | None = Field(None, ge=500, description="NVIDIA driver branch, e.g. 580")


class Host(StrictModel):
    address: str = Field(description="IP address or DNS name")
    port: int = Field(22, ge=1, le=65535)
    user: str | None = None
    key: str | None = Field(None, description="the path of the SSH private key file (never the key itself), "
                                                   "e.g. ~/.ssh/id_ed25519")
    groups: list[Name] = Field(default_factory=list)
    gpus: GPUs | None = None
    vars: dict[str, Any] = Field(default_factory=dict, description="per-host Ansible variables")

    @field_validator("key")
    @classmethod
    def _key_is_path(cls, v: str | None) -> str | None:
        if v is not None and ("PRIVATE KEY" in v or "\n" in v):
            raise ValueError("`key` must be the path of a private key file, never the key itself")
        return v


class Hosts(StrictModel):
    kind: Literal["Hosts"]
    name: Name
    description: str = ""
    defaults: Annotated[dict[str, Any], Field(description="defaults for every host: user, port, key")] = Field(
        default_factory=dict)
    hosts: dict[Name, Host] = Field(min_length=1)
    vars: dict[str, Any] = Field(default_factory=dict, description="Ansible variables for all hosts")

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("defaults"), dict) and isinstance(data.get("hosts"), dict):
            allowed = {"user", "port", "key", "groups", "gpus"}
            for k in data["defaults"]:
                if k not in allowed:
                    raise SpecValueError(f"`defaults` may set {sorted(allowed)}, not {k!r}", key=("defaults", k),
                                         hint=did_you_mean(k, sorted(allowed)) or f"set {k!r} on each host under "
                                         "`hosts:` (or as an Ansible variable under `vars:`)")
            data = dict(data)
            data["hosts"] = {name: ({**data["defaults"], **h} if isinstance(h, dict) else h)
                             for name, h in data["hosts"].items()}
        return data

    @classmethod
    def written_at(cls, loc: tuple, data: Any) -> tuple | None:
        """Where the file wrote a host's value that `defaults:` gave it (hosts.a.key -> defaults.key), so that an
        error in it is shown at its line."""
        if len(loc) >= 3 and loc[0] == "hosts" and isinstance(data, dict) and isinstance(data.get("defaults"), dict):
            host = (data.get("hosts") or {}).get(loc[1])
            if isinstance(host, dict) and loc[2] not in host and loc[2] in data["defaults"]:
                return ("defaults",) + tuple(loc[2:])
        return None

    def group(self, name: str) -> dict[str, Host]:  # data-keyed: host name
        if name == "all":
            return dict(self.hosts)
        return {n: h for n, h in self.hosts.items() if name in h.groups}
