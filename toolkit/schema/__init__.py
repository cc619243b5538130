"""Shared types: what crosses stage boundaries. This package imports no stage (bench, results,
serve, workloads, image, provision, gpu); every stage reads and writes through it.

    records   Prompt, RequestRecord, Stat, CellSummary
    columns   the per-request numeric columns stored beside each cell (.npz)
    keys      SCHEMA_VERSION, FORMAT, STATUSES, cell_key, safe_name
    manifest  Manifest (manifest.json), Summary and Derived (summary.json); loaders for every old shape
"""
