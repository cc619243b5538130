"""`transformers serve` with one fix, run as `python -m toolkit.serve._tserve serve DIR ...`.

Assisted generation (prompt lookup, i.e. the n-gram arm) hands the streamer a (1, k) tensor per step.
transformers' streamer iterates `value.tolist()`, so k accepted tokens count as ONE token in the usage
(and the finish reason says "stop" where the length limit was hit). We flatten the tensor (every token
counted and streamed as its own SSE event; the k events of one step leave in one write) and log tokens
and decoding steps per request (`toolkit-serve: request done tokens=N steps=S first=T0 end=T1`), so the
toolkit can read tokens per step from the server's own count; T0 and T1 (wall-clock seconds, the server's
own clock) are when the first generated token reached the streamer and when the request ended, so what
the server ran at the same time is read from the server, not from a client's read times.

The streamer moved between releases; the shape present is detected, never the version number:
- `cli.serving.utils.DirectStreamer` (transformers 5.0-5.24): in the server process, `_first` marks the
  prompt, `total_tokens` counts.
- `cli.serving.utils._TokenStreamer` (5.25 on): in the model's process (spawned: it imports this module
  again as `__mp_main__`, so the patch applies there too), `prompt` marks the prompt.
Neither found: the server exits at once with one line naming the supported range, which the launcher's
health wait reports as the arm's failure.
"""

import sys
import time

SUPPORTED = "transformers 5.0 to 5.25 (a streamer named DirectStreamer or _TokenStreamer in cli.serving.utils)"


def streamer_shape(utils) -> str | None:
    """Which streamer this transformers has: 'direct', 'token' or None."""
    if hasattr(utils, "DirectStreamer"):
        return "direct"
    if hasattr(utils, "_TokenStreamer"):
        return "token"
    return None


def _log(tokens: int, steps: int, first: float | None) -> None:
    end = time.time()
    print(f"toolkit-serve: request done tokens={tokens} steps={steps} first={first if first is not None else end:.6f} "
          f"end={end:.6f}", file=sys.stderr, flush=True)


def patch_direct(cls) -> None:
    _put, _end = cls.put, cls.end

    def put(self, value):
        if not self._first:
            if not hasattr(self, "_toolkit_t0"):
                self._toolkit_t0 = time.time()
            self._toolkit_steps = getattr(self, "_toolkit_steps", 0) + 1
            value = value.reshape(-1)
        return _put(self, value)

    def end(self):
        _log(self.total_tokens, getattr(self, "_toolkit_steps", 0), getattr(self, "_toolkit_t0", None))
        return _end(self)

    cls.put, cls.end = put, end


def patch_token(cls) -> None:
    _put, _end = cls.put, cls.end

    def put(self, value):
        if not self.prompt:
            if not hasattr(self, "_toolkit_t0"):
                self._toolkit_t0 = time.time()
            value = value.reshape(-1)
            self._toolkit_steps = getattr(self, "_toolkit_steps", 0) + 1
            self._toolkit_tokens = getattr(self, "_toolkit_tokens", 0) + int(value.numel())
        return _put(self, value)

    def end(self):
        _log(getattr(self, "_toolkit_tokens", 0), getattr(self, "_toolkit_steps", 0), getattr(self, "_toolkit_t0", None))
        return _end(self)

    cls.put, cls.end = put, end


def install() -> None:
    try:
        from transformers.cli.serving import utils
    except ImportError as exc:
        sys.exit(f"toolkit-serve: this transformers has no `serve` command ({exc}); supported: {SUPPORTED}")
    shape = streamer_shape(utils)
    if shape == "direct":
        patch_direct(utils.DirectStreamer)
    elif shape == "token":
        patch_token(utils._TokenStreamer)
    else:
        import transformers

        sys.exit(f"toolkit-serve: transformers {transformers.__version__} has neither streamer the toolkit fixes; "
                 f"supported: {SUPPORTED}")


install()

if __name__ == "__main__":
    from transformers.cli.transformers import main

    sys.argv[0] = "transformers"
    sys.exit(main())
