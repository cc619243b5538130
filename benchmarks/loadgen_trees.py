"""The load generator of whichever checkout is first on sys.path, called the same way whatever its layout:
toolkit/loadgen/ with CellLoad (now), toolkit/bench/loadgen.py with keyword arguments (main at 70e4ce2 and
until the loadgen package). Used by loadgen_driver.py and loadgen_profile.py to compare trees in one sitting."""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType


def tree_modules() -> tuple[ModuleType, ModuleType]:
    """(the module with run/run_cell, the HTTP client module) of the tree on sys.path."""
    try:
        return importlib.import_module("toolkit.loadgen"), importlib.import_module("toolkit.loadgen.http")
    except ImportError:
        return importlib.import_module("toolkit.bench.loadgen"), importlib.import_module("toolkit.bench.http")


def share_module(loadgen: ModuleType) -> ModuleType:
    """Where the tree's send_one is looked up by the cell loop (patched by a trace)."""
    if hasattr(loadgen, "CellLoad"):
        return importlib.import_module("toolkit.loadgen.share")
    return importlib.import_module("toolkit.bench.share") if hasattr(loadgen, "Share") else loadgen


def has_workers(loadgen: ModuleType) -> bool:
    return hasattr(loadgen, "CellLoad") or "workers" in inspect.signature(loadgen.run_cell).parameters


def run_tree_cell(loadgen: ModuleType, url: str, api: str, prompts: list, *, model: str = "m",
                  request_params: dict | None = None, **load) -> list:
    """One closed-loop cell: load holds concurrency, requests, output_len and (where the tree has them) workers."""
    if hasattr(loadgen, "CellLoad"):
        cell = loadgen.CellLoad(api=api, request_params=dict(request_params or {}), **load)
        return loadgen.run(loadgen.run_cell(url, cell, prompts, model=model))
    kw = dict(load, model=model)
    if request_params is not None:
        kw["request_params"] = request_params
    return loadgen.run(loadgen.run_cell(url, api, prompts, **kw))
