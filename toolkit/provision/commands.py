"""`toolkit provision host`: a thin Typer shell over toolkit.provision (inventory, runner, display)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from toolkit.console import emit_json, err, json_option, out

JsonResult = json_option("print the run result as JSON on stdout")

app = typer.Typer(no_args_is_help=True, help="Provision GPU hosts with Ansible.")


@app.command("host")
def host_cmd(
    spec: Annotated[Path, typer.Argument(help="a Hosts spec, e.g. envs/hosts/blackwell.yaml")],
    limit: Annotated[Optional[str], typer.Option("--limit", "-l", help="only these hosts or groups "
                                                 "(comma-separated names, globs)")] = None,
    check: Annotated[bool, typer.Option("--check", help="show what would change (check + diff); change nothing")] = False,
    tags: Annotated[Optional[str], typer.Option("--tags", "-t", help="only these roles, comma-separated: common, "
                                                "nvidia_driver, cuda_toolkit, docker, nvidia_container_toolkit, "
                                                "sglang_host, facts (or `gpu` for the three GPU roles)")] = None,
    forks: Annotated[Optional[int], typer.Option("--forks", min=1, help="hosts provisioned in parallel "
                                                 "(default: all selected, up to 16)")] = None,
    json_out: JsonResult = False,
) -> None:
    """Provision the hosts of a Hosts spec with playbooks/site.yml (Ansible through ansible-runner).

    Renders the inventory from the spec, runs the roles over SSH in parallel with live progress, then
    prints a per-host recap, the steps skipped on purpose (and why), and where the run's artifacts are
    ($TOOLKIT_RUNS_DIR, default ~/.cache/toolkit/provision/<run>/, secrets removed). The `facts` role
    writes a host fingerprint to ~/.cache/toolkit/hosts/<host>.json for `toolkit bench`.

    Exit 0 when every host succeeded; 1 when a host failed or was unreachable (the others still run),
    naming host, task and message; 2 for a bad spec.

    Examples:

      toolkit provision host envs/hosts/blackwell.yaml --check

      toolkit provision host envs/hosts/blackwell.yaml --limit gpu-01 --tags common,docker
    """
    from toolkit.provision.display import LiveProgress, print_report
    from toolkit.provision.runner import provision, raise_for_result, select_hosts
    from toolkit.specs import load_spec

    loaded = load_spec(spec, expect="Hosts")
    if json_out:
        result = provision(loaded, limit=limit, check=check, tags=tags, forks=forks)
        emit_json(result.to_dict())
        raise_for_result(result)  # failures also go to stderr, exit 1
        return
    with LiveProgress(err, select_hosts(loaded, limit)) as progress:
        result = provision(loaded, limit=limit, check=check, tags=tags, forks=forks, on_event=progress)
    print_report(out, result)
    raise_for_result(result)
