"""What the pair's two steps write and read: PREP/manifest.json (prepare -> train, draft, sample) and
OUT/pair.json (train, draft). Both are written as `json.dumps(model_dump(exclude_unset), indent=1)`: the fields
set, in the order declared here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow")

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.model_dump(mode="json", exclude_unset=True), indent=1) + "\n")


class PrepManifest(_Record):
    """PREP/manifest.json: the recipe, the corpus sources with their hashes, token counts per domain, the prompt
    sets' offsets into their prompts-<set>.u16, every file's sha256 and the library versions."""

    recipe: dict[str, Any] = Field(default_factory=dict)
    sources: dict[str, Any] = Field(default_factory=dict)
    tokens: dict[str, int] = Field(default_factory=dict)
    tokens_total: int = 0
    vocab_size: int = 0
    prompts: dict[str, list[int]] = Field(default_factory=dict, description="prompt set -> offsets")
    prompt_max: int = 0
    files: dict[str, str] = Field(default_factory=dict, description="relative path -> sha256")
    versions: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def read(cls, prep: Path) -> "PrepManifest":
        return cls.model_validate(json.loads((prep / "manifest.json").read_text()))


@dataclass(frozen=True, slots=True)
class DraftAcceptance:
    """The drafter's own acceptance on one domain's prompts: completion tokens per verify step."""

    accept_length: float
    tokens: int
    verify_steps: int
    prompts: int


class PairRecord(_Record):
    """OUT/pair.json: the recipe, the prepared folder it read (its manifest's sha256), the device and versions,
    what each half did (`target` or the target it started from, the answers, the drafter, its acceptance per
    domain), the seconds, and every file's sha256 with the weights' folder digests."""

    recipe: dict[str, Any] = Field(default_factory=dict)
    prep_manifest_sha256: str | None = None
    device: str | None = None
    device_name: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    target: dict[str, Any] | None = Field(None, description="train: how the target was trained")
    target_dir: str | None = Field(None, description="draft: the target folder the drafter was made for")
    target_sha256: str | None = None
    answers: dict[str, Any] | None = Field(None, description="the target's answers the drafter learnt from")
    draft: dict[str, Any] | None = None
    acceptance: dict[str, DraftAcceptance] | None = None
    seconds: float | None = None
    files: dict[str, str] = Field(default_factory=dict)
    weights: dict[str, str] = Field(default_factory=dict)
