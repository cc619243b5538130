"""`transformers serve` with one fix, run as `python -m toolkit.serve._tserve serve DIR ...`.

transformers 5.x DirectStreamer.put iterates `value.tolist()`: assisted generation (prompt lookup,
i.e. the n-gram arm) puts a (1, k) tensor per step, so k accepted tokens count as ONE token in the
usage and the finish reason says "stop" where the length limit was hit. We flatten the tensor (every
token counted and streamed as its own SSE event; the k events of one step leave in one write) and
log tokens and decoding steps per request, so a test can observe what the server did.
"""

import sys

from transformers.cli.serving import utils

_put, _end = utils.DirectStreamer.put, utils.DirectStreamer.end


def put(self, value):
    if not self._first:
        self._toolkit_steps = getattr(self, "_toolkit_steps", 0) + 1
        value = value.reshape(-1)
    return _put(self, value)


def end(self):
    print(f"toolkit-serve: request done tokens={self.total_tokens} steps={getattr(self, '_toolkit_steps', 0)}",
          file=sys.stderr, flush=True)
    return _end(self)


utils.DirectStreamer.put, utils.DirectStreamer.end = put, end

if __name__ == "__main__":
    from transformers.cli.transformers import main

    sys.argv[0] = "transformers"
    sys.exit(main())
