"""toolkit: declarative, reproducible environments and honest benchmarks for LLM serving."""

__version__ = "0.1.0"
