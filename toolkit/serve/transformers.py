"""The embedded default engine: `transformers serve DIR --device cpu --port P` as a child process.

Arms differ by per-request `generation_config` (e.g. prompt_lookup_num_tokens: n-gram speculation).
That only works WITHOUT --continuous-batching: in transformers 5.x serve, continuous batching builds
one shared generation config from the first request (CBGenerateManager.init_cb runs once) and
add_request takes only max_new_tokens and eos_token_id, so a per-request prompt lookup is silently
ignored. Without it every request runs `model.generate(generation_config=...)` with its own config,
one request at a time. Both arms send a generation_config (same code path; only prompt lookup
differs). The server runs through toolkit.serve._tserve, which fixes token counting for multi-token
steps and logs tokens/steps per request. See docs/loadgen.md.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.engines import transformers as transformers_engine
from toolkit.schema.manifest import ArmState
from toolkit.serve.base import ProcessLauncher


def _cli() -> list[str]:
    """`transformers` with the streamer fix of toolkit.serve._tserve (multi-token steps counted per token)."""
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        raise ToolkitError("transformers is not installed",
                           hint='pip install "toolkit[local]" (transformers[serving], torch CPU)')
    return [sys.executable, "-m", "toolkit.serve._tserve"]


def render_serve_args(args: dict) -> list[str]:
    """A preset's args as `transformers serve` flags: `true` -> --flag, `false` -> --no-flag, else --flag value.
    Unknown flags are left to `transformers serve`, which exits at once; wait_healthy reports its log."""
    out: list[str] = []
    for key, value in args.items():
        if value is True:
            out.append(f"--{key}")
        elif value is False:
            out.append(f"--no-{key}")
        else:
            out += [f"--{key}", str(value)]
    return out


class TransformersLauncher(ProcessLauncher):
    name = "transformers serve"

    def __init__(self, model_dir: str | Path, *, args: dict | None = None, port: int | None = None,
                 log_path: Path | None = None):
        self.model_dir = Path(model_dir)
        self.args = dict(args or {})
        log_path = log_path or Path(tempfile.mkdtemp(prefix="toolkit-serve-")) / "server.log"
        super().__init__([], log_path=log_path, port=port,
                         env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
        device = [] if "device" in self.args else ["--device", "cpu"]  # a preset's `device: cuda` replaces it
        self.command = [*_cli(), "serve", str(self.model_dir), *device, "--host", self.host,
                        "--port", str(self.port), *render_serve_args(self.args)]
        self.model = str(self.model_dir)  # transformers serve names the preloaded model by its path

    def info(self) -> ArmState:
        from importlib.metadata import version

        cap = transformers_engine.running_cap(self.args)  # one generate() at a time without continuous batching
        return super().info().add(engine="transformers", engine_version=version("transformers"),
                                  continuous_batching=cap is None, max_running_requests=cap)
