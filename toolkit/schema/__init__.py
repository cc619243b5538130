"""Shared types: what crosses stage boundaries. This package imports no stage (bench, results,
serve, workloads, image, provision, gpu); every stage reads and writes through it.

    records   Prompt, RequestRecord, Stat, CellSummary
    metrics   the metric registry: every metric once (name, unit, better, sample kind, CI), describe()
    columns   the per-request numeric columns stored beside each cell (.npz), under registry names
    keys      SCHEMA_VERSION, FORMAT, STATUSES, cell_key, safe_name
    manifest  Manifest (manifest.json), Summary and Derived (summary.json); loaders for every old shape
    tune      TuneState (a tune session's tune.json) and TuneResult (`bench tune --json`); every older session loads
    progress  RunProgress: what the matrix runner tells a display, every call a no-op unless overridden
"""
