"""The types engine knowledge is given in: what a preset means (PresetMeaning), what a tunable knob is
(KnobInfo), what an engine is as a whole (EngineFacts) and what a running server says about itself
(ServerState). Plain frozen dataclasses: they hold facts, read by spec, image, serve, bench and tune, and
import nothing of the toolkit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class KnobInfo:
    name: str
    level: str          # "request": a parameter of each request (no restart); "server": a flag (a launch per value)
    minimum: int
    help: str


@dataclass(frozen=True)
class PresetMeaning:
    """What one preset of an Environment means to its engine, read from the spec alone (what the server
    says about itself once it runs is bench's to record)."""
    engine: str
    speculative: bool = False
    algorithm: str | None = None      # as the preset writes it (SGLang: "NGRAM", "EAGLE3"...; "prompt lookup")
    cap: int | None = None            # requests the server runs at once, where the preset fixes or implies it
    cap_implicit: bool = False        # the cap is the engine's own (SGLang: speculation on, the flag unset)
    dummy_weights: bool = False       # random weights (SGLang: load-format dummy; transformers: model.dummy)
    reads: frozenset[str] = field(default_factory=frozenset)  # model folders the preset names (SGLang)


@dataclass(frozen=True)
class EngineFacts:
    """An engine as the tuner and the write-back see it: its knobs, and whether a trial restarts the server."""
    name: str
    knobs: dict[str, KnobInfo]
    level: str          # "request" (every knob a request parameter: one server for all trials) or "server"


@dataclass(frozen=True)
class ServerState:
    """What a running server says about itself (Engine.server_state: SGLang's /server_info, vLLM's /version and
    dev-mode config), in one shape for every engine; the runner and the import copy it into the arm's ArmState
    (toolkit.schema.manifest, ArmState.add_state). `said`: the fields the engine's reading gives, None among
    them where the server was asked and gave nothing (ServerState.of keeps them; an engine without a reading
    gives none)."""

    engine: str | None = None
    server_info_read: bool = False
    engine_version: str | None = None
    max_running_requests: int | None = None  # the scheduler's effective cap
    speculative: dict[str, Any] = field(default_factory=dict)  # the speculation settings, by the server's names
    speculative_algorithm: str | None = None
    avg_spec_accept_length: float | None = None  # SGLang's server-wide figure since the last flush
    said: tuple[str, ...] = ()

    @classmethod
    def of(cls, **given: Any) -> ServerState:
        """These fields, as given (None too): `said` names them."""
        return cls(**given, said=tuple(given))
