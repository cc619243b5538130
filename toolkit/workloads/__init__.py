"""Workloads: bundled domain prompts, the user's JSON lines, and how far a workload is from the
drafter's training data (representativeness). See docs/workloads.md."""

from toolkit.workloads.bundled import BUNDLED, MATCH_TRAINING
from toolkit.workloads.loader import LoadedWorkload, content_hash, load_workload
from toolkit.workloads.represent import Report, compare_to_training, representativeness

__all__ = ["BUNDLED", "MATCH_TRAINING", "LoadedWorkload", "Report", "compare_to_training", "content_hash",
           "load_workload", "representativeness"]
