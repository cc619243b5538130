"""Hosts spec -> Ansible inventory (YAML, through templates/inventory.yml.j2) and connection settings.

    inv = render_inventory(load_spec("envs/hosts/blackwell.yaml", expect="Hosts"))
    inv.text            # the inventory file, deterministic for a given spec and machine
    inv.hosts           # host names in spec order

Per host: `ansible_host/port/user`, `ansible_ssh_private_key_file` (the key *path*, resolved relative
to the spec file), `toolkit_gpus` (expected GPUs) and the host's `vars`. Groups come from `groups:`;
the spec's top-level `vars` become `all.vars` (lowest precedence, so per-host vars win).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from toolkit import __version__
from toolkit.errors import SpecError
from toolkit.specs import LoadedSpec
from toolkit.specs.hosts import Hosts

# Ansible's own variable-name rule: a spec var that breaks it would be silently unusable in a play.
VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED = ("ansible_host", "ansible_port", "ansible_user", "ansible_ssh_private_key_file", "toolkit_gpus")


@dataclass
class Inventory:
    name: str
    text: str
    hosts: list[str]
    keys: dict[str, Path] = field(default_factory=dict)  # host -> private key path (may not exist)

    def write(self, path: Path) -> Path:
        from toolkit.errors import ToolkitError
        from toolkit.fsutil import write_atomic

        if path.is_dir():
            raise ToolkitError(f"{path} is a folder: -o names the inventory file to write",
                               hint=f"give a file name, e.g. -o {path / 'inventory.yml'}")
        return write_atomic(path, self.text, mode=0o600)  # an OSError: `path: what is wrong` (errors.os_error)


def _check_vars(spec: LoadedSpec, keypath: tuple, mapping: dict) -> None:
    for key in mapping:
        if not VAR_RE.match(str(key)):
            raise spec.error((*keypath, key), f"{key!r} is not a valid Ansible variable name",
                             hint="use letters, digits and '_', not starting with a digit")
        if key in RESERVED:
            raise spec.error((*keypath, key), f"{key!r} is set by toolkit from the host's fields",
                             hint="set address/port/user/key/gpus on the host instead")


def render_inventory(spec: LoadedSpec) -> Inventory:
    from toolkit.render import jinja_env

    hosts_spec: Hosts = spec.model
    if not isinstance(hosts_spec, Hosts):
        raise SpecError(f"provisioning needs a Hosts spec, {spec.path} is a {spec.kind}", file=spec.path)
    _check_vars(spec, ("vars",), hosts_spec.vars)
    rendered_hosts, keys, groups = [], {}, {}
    for name, h in hosts_spec.hosts.items():
        _check_vars(spec, ("hosts", name, "vars"), h.vars)
        hv: dict = {"ansible_host": h.address, "ansible_port": h.port}
        if h.user:
            hv["ansible_user"] = h.user
        if h.key:
            key = spec.path_of(("hosts", name, "key"), value=h.key, must_exist=False).resolve()
            keys[name] = key
            hv["ansible_ssh_private_key_file"] = str(key)
        if h.gpus:
            hv["toolkit_gpus"] = h.gpus.model_dump(mode="json", exclude_none=True)
        hv.update(h.vars)
        rendered_hosts.append({"name": name, "vars": hv})
        for g in h.groups:
            groups.setdefault(g, []).append(name)
    text = jinja_env().get_template("inventory.yml.j2").render(
        toolkit_version=__version__, spec_file=spec.path.name, name=hosts_spec.name,
        hosts=rendered_hosts, groups=groups, vars=hosts_spec.vars)
    return Inventory(name=hosts_spec.name, text=text, hosts=list(hosts_spec.hosts), keys=keys)


def check_keys(spec: LoadedSpec, inv: Inventory, hosts: list[str]) -> None:
    """Every selected host's key file must exist before Ansible starts (a clear error, not an SSH one)."""
    for name in hosts:
        key = inv.keys.get(name)
        if key is not None and not key.is_file():
            raise spec.error(("hosts", name, "key"), f"SSH key {str(key)!r} of host {name!r} does not exist",
                             hint="point `key:` at a private key file (a path, relative to the spec file or ~/...)")
