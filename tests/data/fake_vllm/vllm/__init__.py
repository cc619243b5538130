"""A fake vLLM for CPU tests (tests/data/fake_vllm/vllm/entrypoints/cli/main.py)."""
__version__ = "0.24.0-fake"
