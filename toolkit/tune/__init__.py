"""`toolkit bench tune`: the best speculative settings of one arm per domain and concurrency, found by
successive halving on a tune sample, confirmed on held-out prompts, written back into the Environment.

    space.py      knobs per engine, SGLang's rules between its speculative flags (checked before anything runs)
    search.py     trials, rungs, scores, survivors, winners: numbers only, deterministic
    specs.py      the prompt split and the generated specs of every run
    session.py    the session: runs (through one adapter into the matrix runner), state, resume
    progress.py   the bar over trials with the current best
    report.py     the result JSON and the report (heatmap, winners, confirmation)
    writeback.py  the tuned Environment, a round-trip YAML edit with a comment per tuned value

docs/tune.md describes the spec block, the search and the output.
"""
