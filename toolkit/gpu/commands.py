"""`toolkit gpu ...`: check that a host (or a built image) can run an Environment on its GPUs.
(`toolkit env validate`, the old name, still works: a hidden alias that says where the command went.)"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Optional

import typer

from toolkit.console import emit_json, err, json_option, out

JsonReport = json_option("print the JSON report on stdout")

app = typer.Typer(no_args_is_help=True)

_MARK = {"pass": "[green]pass[/green]", "fail": "[red]FAIL[/red]", "skip": "[yellow]skip[/yellow]"}


@app.callback()
def _group() -> None:
    """Validate a GPU environment: CUDA, compute capability and flags, NCCL, collectives, memory."""


@app.command("validate")
def validate_cmd(
    spec: Annotated[Optional[Path], typer.Option("--spec", help="an Environment spec: check its CUDA major, "
                                                  "its SM-gated server flags and mem-fraction-static")] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", help="also spawn one process per GPU: NCCL "
                                                "all-reduce sum, bus bandwidth, symmetric-memory probe")] = None,
    backend: Annotated[str, typer.Option("--backend", help="collective backend for --gpus: auto (nccl with "
                                         "CUDA, else gloo on CPU processes), nccl or gloo")] = "auto",
    require_gpu: Annotated[bool, typer.Option("--require-gpu", help="a missing GPU fails the checks "
                                              "instead of skipping them")] = False,
    out_file: Annotated[Optional[Path], typer.Option("-o", "--out", help="also write the JSON report here")] = None,
    json_out: JsonReport = False,
) -> None:
    """Check this machine: each check passes, fails or is skipped with the reason. Exit 1 on a failure.

    \b
    Examples:
      toolkit gpu validate                          # what this machine has
      toolkit gpu validate --spec envs/sglang-cu13-blackwell.yaml --require-gpu
      toolkit gpu validate --gpus 8 --json -o results/gpu-validation/host.json
      toolkit gpu validate --gpus 2 --backend gloo  # the same probes on 2 CPU processes

    NVLink multicast stays off in every process (NCCL_NVLS_ENABLE=0,
    TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1)."""
    from toolkit.fsutil import write_json
    from toolkit.gpu.validate import validate

    if json_out:
        report = validate(spec, gpus, require_gpu, backend)
    else:
        with err.status("validating") as status:
            report = validate(spec, gpus, require_gpu, backend, progress=lambda m: status.update(f"checking {m}"))
    if out_file is not None:
        write_json(out_file, report)
    if json_out:
        emit_json(report)
    else:
        _print(report)
        if out_file is not None:
            out.print(f"wrote {out_file}")
    if not report["ok"]:
        raise typer.Exit(1)


legacy_app = typer.Typer(no_args_is_help=True, hidden=True, help="Deprecated: use `toolkit gpu`.")


@legacy_app.command("validate", help="Deprecated: use `toolkit gpu validate` (same options).")
@functools.wraps(validate_cmd)
def legacy_validate_cmd(*args, **kwargs) -> None:
    err.print("warning: `toolkit env validate` is now `toolkit gpu validate`", markup=False)
    return validate_cmd(*args, **kwargs)


def _print(report: dict) -> None:
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    for c in report["checks"]:
        table.add_row(c["name"], _MARK[c["status"]], c["detail"])
    out.print(table)
    for c in report["checks"]:
        if c["name"] == "allreduce_busbw" and c["status"] == "pass":
            bw = Table("bytes", "time us", "algbw GB/s", "busbw GB/s", box=None, title="all-reduce (slowest rank)")
            for r in c["data"]["table"]:
                bw.add_row(str(r["bytes"]), f"{r['time_us']:.1f}", f"{r['algbw_gbps']:.2f}", f"{r['busbw_gbps']:.2f}")
            out.print(bw)
    s = report["summary"]
    out.print(f"{s['pass']} passed, {s['fail']} failed, {s['skip']} skipped"
              + ("" if report["ok"] else "  (exit 1)"))
