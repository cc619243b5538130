"""The load generator: what a cell sends (CellLoad), the HTTP/SSE client, the cell loop over one or more
processes, and a cell's summary. Below bench, which drives it: it imports schema, errors and endpoints only.

    from toolkit.loadgen import CellLoad, run, run_cell
    records = run(run_cell(url, CellLoad(api="chat", concurrency=4, requests=32), prompts, model="m"))

Modules: load (CellLoad, worker counts), http (a streaming HTTP/1.1 pool), client (one request -> one
RequestRecord), share (one process's part of a cell), workers (a cell over N processes), cell (run_cell),
summary (records -> CellSummary), __main__ (`python -m toolkit.loadgen URL`). docs/loadgen.md.
"""

from toolkit.loadgen.cell import run_cell
from toolkit.loadgen.load import CellLoad, auto_workers, resolve_workers, sent
from toolkit.loadgen.share import CellFailed, item, run, schedule
from toolkit.loadgen.summary import itl_values, summarize

__all__ = ["CellLoad", "CellFailed", "auto_workers", "item", "itl_values", "resolve_workers", "run", "run_cell",
           "schedule", "sent", "summarize"]
