"""CLI command of the workloads stage (`toolkit bench representativeness`, declared here in `bench_app`)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from toolkit.console import JsonOpt

# `toolkit bench representativeness`: shown under bench; toolkit/cli.py merges this group into bench
bench_app = typer.Typer()


class Method(str, Enum):
    rules = "rules"
    embedding = "embedding"
    both = "both"


@bench_app.command("representativeness")
def representativeness(
    train: Annotated[Path, typer.Option("--train", help="a sample of the drafter's training data: JSON lines in "
                                        "ShareGPT, OpenAI `messages` or prompt/completion form")],
    workload: Annotated[list[str], typer.Option("--workload", "-w", help="bundled name (coding, agentic, "
                        "encyclopedic, math, chat), match-training, or a JSON lines file; repeat for several")],
    sample: Annotated[Optional[int], typer.Option("--sample", "-n", min=1, help="seeded sample of N workload prompts")] = None,
    seed: Annotated[int, typer.Option(help="seed for sampling")] = 0,
    holdout: Annotated[bool, typer.Option("--holdout", help="drop workload prompts that also appear in --train")] = False,
    classifier: Annotated[Method, typer.Option(help="domain classifier: transparent rules; embedding (needs the "
                          "`embed` extra); both (rules, embedding where the rules are unsure)")] = Method.rules,
    tokenizer: Annotated[Optional[Path], typer.Option(help="local Hugging Face tokenizer folder for token counts "
                         "(default: words and punctuation, no tokenizer)")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="exit 1 when any workload is far from the training data")] = False,
    json_out: JsonOpt = False,
) -> None:
    """How representative is a workload of the drafter's training data?

    Classifies the domain of every prompt in both, and prints side by side: the domain mix, prompt
    length distributions, lexical overlap, and one divergence score (Jensen-Shannon over domain mix
    and length bins) with a verdict: close, moderate or far, and the reason.

    Example: toolkit bench representativeness --train train.jsonl -w coding -w encyclopedic
    """
    from toolkit.console import emit_json
    from toolkit.specs.matrix import Workload
    from toolkit.workloads.bundled import BUNDLED, MATCH_TRAINING, read_prompts
    from toolkit.workloads.loader import load_workload, name_of
    from toolkit.workloads.represent import hf_length_fn, representativeness as compare

    train_prompts = read_prompts(train)
    length_fn = hf_length_fn(str(tokenizer)) if tokenizer else None
    reports = []
    for ref in workload:
        if holdout and ref != MATCH_TRAINING:  # match-training always leaves the training prompts out
            ref = Workload.model_construct(name=name_of(ref) if ref not in BUNDLED else ref, sample=None,
                                           path=None if ref in BUNDLED else ref, holdout=str(train.resolve()))
        wl = load_workload(ref, base_dir=Path.cwd(), seed=seed, n=sample, training=train)
        reports.append(compare(train_prompts, wl.prompts, classifier=classifier.value,
                               train_name=train.name, workload_name=wl.name, workload_hash=wl.hash,
                               length_fn=length_fn, length_unit=f"tokens ({tokenizer})" if tokenizer else None))
    if json_out:
        emit_json([r.model_dump() for r in reports])
    else:
        _print(reports)
    if strict and any(r.verdict == "far" for r in reports):
        raise typer.Exit(1)


def _print(reports) -> None:
    from rich.table import Table

    from toolkit.console import out
    from toolkit.workloads.classify import DOMAINS

    colour = {"close": "green", "moderate": "yellow", "far": "red"}
    for r in reports:
        t = Table(title=f"{r.workload.name} vs {r.train.name}", title_justify="left")
        t.add_column("")
        t.add_column(f"train: {r.train.name}", justify="right")
        t.add_column(f"workload: {r.workload.name}", justify="right")
        t.add_row("prompts", str(r.train.n), str(r.workload.n))
        for d in DOMAINS:
            t.add_row(f"  {d}", f"{100 * r.train.domain_mix[d]:.0f}%", f"{100 * r.workload.domain_mix[d]:.0f}%")
        for key in ("p50", "p90", "mean", "max"):
            t.add_row(f"length {key}", f"{getattr(r.train.lengths, key):.0f}", f"{getattr(r.workload.lengths, key):.0f}")
        t.add_row("output p50", f"{r.train.output_p50:.0f}", f"{r.workload.output_p50:.0f}")
        out.print(t)
        out.print(f"length unit: {r.length_unit}; classifier: {r.classifier}")
        out.print(f"lexical overlap: {100 * r.vocab_coverage:.0f}% of workload words occur in training "
                  f"(Jaccard of vocabularies {r.vocab_jaccard:.2f})")
        out.print(f"divergence: {r.score:.2f} = 0.75 x JS domain {r.js_domain:.2f} + 0.25 x JS length {r.js_length:.2f}")
        c = colour[r.verdict]
        out.print(f"verdict: [{c}]{r.verdict.upper()}[/{c}] - {r.reason}\n")


class TraceFormat(str, Enum):
    mooncake = "mooncake"


@bench_app.command("trace-import")
def trace_import(
    file: Annotated[Path, typer.Argument(help="the trace to convert")],
    output: Annotated[Path, typer.Option("--output", "-o", help="where to write the toolkit's trace (JSON lines)")],
    source: Annotated[TraceFormat, typer.Option("--from", help="mooncake: JSON lines of timestamp (ms), "
                                                "input_length, output_length, hash_ids (Mooncake's FAST'25 traces)")]
    = TraceFormat.mooncake,
) -> None:
    """Convert a request trace to the toolkit's trace format (timestamps in seconds; docs/loadgen.md#traces),
    for `python -m toolkit.loadgen URL --trace FILE [--speed S]`.

    Example: toolkit bench trace-import conversation_trace.jsonl --from mooncake -o trace.jsonl"""
    from toolkit.console import out
    from toolkit.errors import ToolkitError
    from toolkit.fsutil import same_file, write_atomic
    from toolkit.schema.trace import convert_mooncake

    if same_file(output, file):
        raise ToolkitError(f"{output}: -o is the trace being converted: writing there would replace the original",
                           hint=f"give another -o, e.g. -o {Path(output).with_suffix('')}.toolkit.jsonl")
    lines = convert_mooncake(file)
    write_atomic(output, "\n".join(lines) + "\n")  # its folder made where missing; never half a file
    n = len(lines)
    out.print(f"{n} requests: {file} -> {output}", markup=False)
