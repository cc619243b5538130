"""Run archives and what reads them: write (ArchiveWriter), read (open_archive), list, verify, diff,
report, import. The format is described in docs/results.md.

    from toolkit.results import ArchiveWriter, open_archive, cell_key, verify_run, list_runs
"""

__all__ = ["SCHEMA_VERSION", "Archive", "ArchiveWriter", "cell_key", "list_runs", "open_archive", "verify_run"]


def __getattr__(name: str):  # lazy: `toolkit --help` does not pay for numpy and pydantic models
    if name == "list_runs":
        from toolkit.results.facts import list_runs

        return list_runs
    if name == "verify_run":
        from toolkit.results.verify import verify_run

        return verify_run
    if name in __all__:
        from toolkit.results import archive

        return getattr(archive, name)
    raise AttributeError(name)
