"""The `toolkit` command: a thin Typer shell. Each command parses options and calls one library
function; errors are ToolkitError, printed without a traceback; exit codes: toolkit/exits.py (README
"Exit codes")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from toolkit import __version__
from toolkit.console import JsonOpt, emit_json, err, out, warn
from toolkit.errors import ToolkitError, did_you_mean

app = typer.Typer(
    name="toolkit",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    help="Declarative, reproducible environments and honest benchmarks for serving LLMs with SGLang.\n\n"
         "Pipeline: spec -> render -> build | provision -> serve -> load -> archive -> diff.\n\n"
         "Start with `toolkit bench matrix envs/matrices/quickstart.yaml` (runs on the CPU), or "
         "`toolkit validate envs/*.yaml` to check specs.",
)
render_app = typer.Typer(no_args_is_help=True, help="Render specs into files (Dockerfile, lock manifest, inventory).")
app.add_typer(render_app, name="render")


def _register_stages() -> None:
    from toolkit.bench.commands import app as bench_app
    from toolkit.bench.commands import results_app as bench_results
    from toolkit.image.commands import app as build_app
    from toolkit.gpu.commands import app as gpu_app, legacy_app as env_app
    from toolkit.provision.commands import app as provision_app
    from toolkit.results.commands import app as results_app
    from toolkit.tune.commands import bench_app as tune_bench
    from toolkit.workloads.commands import bench_app as workloads_bench

    # a command whose code lives in a package above the group that shows it declares itself there, in a
    # Typer of its own; merged here (a Typer added with no name adds its commands to the group)
    bench_app.add_typer(workloads_bench)
    bench_app.add_typer(tune_bench)
    results_app.add_typer(bench_results)

    app.add_typer(build_app, name="build", help="Build environment images with the Docker engine.")
    app.add_typer(provision_app, name="provision", help="Provision GPU hosts with Ansible.")
    app.add_typer(bench_app, name="bench", help="Benchmark server presets on domain workloads.")
    app.add_typer(results_app, name="results", help="List, verify, diff and report archived runs.")
    app.add_typer(gpu_app, name="gpu", help="Validate this machine's GPUs for an Environment (host or image).")
    app.add_typer(env_app, name="env", hidden=True)  # the old name of `gpu validate`




@app.command()
def validate(
    paths: Annotated[list[Path], typer.Argument(help="spec files (Environment, Hosts, Matrix)")],
    json_out: JsonOpt = False,
) -> None:
    """Validate spec files: schema, referenced files, patch sha256. Exit 2 on the first bad file."""
    from toolkit.specs import check_patch_hashes, load_spec, referenced_files

    results, failed = [], None
    for p in paths:
        try:
            spec = load_spec(p)
            referenced_files(spec)
            check_patch_hashes(spec)
            if spec.kind == "Matrix":
                from toolkit.tune.space import check_matrix

                check_matrix(spec)  # what the run refuses before it starts: target, workloads, tune block
            results.append({"path": str(p), "kind": spec.kind, "name": spec.name, "ok": True,
                            "warnings": spec.warnings})
            if not json_out:
                out.print(f"ok  {p}  ({spec.kind} {spec.name})")
                for w in spec.warnings:
                    warn(f"{p}: {w}")
        except ToolkitError as exc:
            results.append({"path": str(p), "ok": False, **exc.to_dict()})
            failed = failed or exc
            if not json_out:
                err.print(f"FAIL {exc}", markup=False)
    if json_out:
        emit_json(results)
    if failed:
        raise typer.Exit(2)


@app.command()
def schema(
    kind: Annotated[Optional[str], typer.Argument(help="Environment, Hosts or Matrix (default: all)")] = None,
    out_dir: Annotated[Optional[Path], typer.Option("-o", "--out", help="write <Kind>.schema.json files here")] = None,
) -> None:
    """Print the JSON Schema of each spec kind (for editor completion, e.g. yaml-language-server)."""
    from toolkit.fsutil import write_json
    from toolkit.specs import json_schemas

    schemas = json_schemas()
    if kind is not None:
        if kind not in schemas:
            raise ToolkitError(f"unknown kind {kind!r}", hint=did_you_mean(kind, list(schemas)) or f"one of {', '.join(schemas)}")
        schemas = {kind: schemas[kind]}
    if out_dir:
        for k, s in schemas.items():
            write_json(out_dir / f"{k}.schema.json", s)
            out.print(f"wrote {out_dir / f'{k}.schema.json'}")
    else:
        emit_json(schemas if kind is None else schemas[kind])


@render_app.command("env")
def render_env_cmd(
    spec: Annotated[Path, typer.Argument(help="an Environment spec")],
    out_dir: Annotated[Optional[Path], typer.Option("-o", "--out", help="output folder (default: build/<name>)")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Render an Environment into a Dockerfile, its build context and toolkit.lock.json."""
    from toolkit.render import render_env
    from toolkit.specs import load_spec

    loaded = load_spec(spec, expect="Environment")
    rendered = render_env(loaded)
    target = out_dir or Path("build") / loaded.name
    written = rendered.write(target)
    if json_out:
        emit_json({"spec_hash": rendered.hash, "out": str(target), "files": [str(w) for w in written],
                   "warnings": loaded.warnings})
        return
    for w in loaded.warnings:
        warn(w)
    for w in written:
        out.print(f"wrote {w}")
    out.print(f"spec hash {rendered.hash}")


@render_app.command("hosts")
def render_hosts_cmd(
    spec: Annotated[Path, typer.Argument(help="a Hosts spec")],
    out_file: Annotated[Optional[Path], typer.Option("-o", "--out", help="write the inventory here (default: stdout)")] = None,
) -> None:
    """Render a Hosts spec into the Ansible inventory that `toolkit provision host` uses."""
    from toolkit.fsutil import same_file
    from toolkit.provision.inventory import render_inventory
    from toolkit.specs import load_spec

    inv = render_inventory(load_spec(spec, expect="Hosts"))
    if out_file and same_file(out_file, spec):
        raise ToolkitError(f"{out_file}: -o is the Hosts spec being rendered: writing there would replace it",
                           hint="give another -o, e.g. -o inventory.yml")
    if out_file:
        out.print(f"wrote {inv.write(out_file)}")
    else:
        sys.stdout.write(inv.text)


@render_app.command("slurm")
def render_slurm_cmd(
    spec: Annotated[Path, typer.Argument(help="a Matrix spec with `target: {kind: slurm}`")],
    out_dir: Annotated[Optional[Path], typer.Option("-o", "--out", help="write one <job>.sbatch per arm here "
                                                    "(default: print them)")] = None,
) -> None:
    """Render a Slurm matrix's job scripts: one sbatch script per arm, as `bench matrix` submits them."""
    from toolkit.bench.plan import plan_target
    from toolkit.slurm.render import render_jobs, write_jobs
    from toolkit.specs import load_spec

    plan = plan_target(load_spec(spec, expect="Matrix"))
    jobs = render_jobs(plan.spec, plan.env_spec, served=plan.served)
    if out_dir:
        for path in write_jobs(jobs, out_dir):
            out.print(f"wrote {path}")
    else:
        sys.stdout.write("\n".join(job.text for job in jobs))


def version_callback(value: bool) -> None:
    if value:
        out.print(f"toolkit {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=version_callback, is_eager=True,
                                          help="print the version")] = False,
) -> None:
    pass


_register_stages()


def main(argv: list[str] | None = None) -> int:
    from toolkit.exits import run_command

    return run_command(app, argv, "toolkit")


if __name__ == "__main__":
    sys.exit(main())
