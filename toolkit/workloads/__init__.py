"""Workloads: bundled domain prompts, the user's JSON lines, and how far a workload is from the
drafter's training data (representativeness)."""

from toolkit.workloads.loader import BUNDLED, MATCH_TRAINING, LoadedWorkload, content_hash, load_workload

__all__ = ["BUNDLED", "MATCH_TRAINING", "LoadedWorkload", "content_hash", "load_workload"]
