"""The prompt sets shipped with the toolkit (toolkit/workloads/data/<domain>.jsonl), and reading a
prompts file. Both the loader and the classifier (its labelled examples) read them from here."""

from __future__ import annotations

from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.schema.records import Prompt
from toolkit.workloads.formats import read_jsonl

DATA_DIR = Path(__file__).resolve().parent / "data"
BUNDLED = ("coding", "agentic", "encyclopedic", "math", "chat")
MATCH_TRAINING = "match-training"  # not a file: bundled prompts drawn to match the training data's mix


def bundled(name: str) -> list[Prompt]:
    if name not in BUNDLED:
        raise ToolkitError(f"unknown bundled workload {name!r}",
                           hint=f"one of {', '.join(BUNDLED)}, {MATCH_TRAINING}, or a JSON lines file path")
    return [it.prompt for it in read_jsonl(DATA_DIR / f"{name}.jsonl")]


def read_prompts(path: Path) -> list[Prompt]:
    return [it.prompt for it in read_jsonl(path)]
