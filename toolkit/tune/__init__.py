"""`toolkit bench tune`: the best speculative settings of one arm per domain and concurrency, found by
successive halving on a tune sample, confirmed on held-out prompts, written back into the Environment.

    space.py      knobs per engine, SGLang's rules between its speculative flags (checked before anything runs)
    search.py     trials, rungs, scores, survivors, winners: numbers only, deterministic
    specs.py      the prompt split and the generated specs of every run
    session.py    the session: checks, then state, search and servers put together; the progress is the caller's
    state.py      tune.json (toolkit.schema.tune.TuneState): a new session, --resume, the save after every step
    loop.py       the rungs and the confirmation, each an ordinary matrix run (one adapter into the runner)
    servers.py    one shared server (request-level knobs) or the matrix's target (a launch per trial)
    progress.py   SearchProgress (every call a no-op) and TuneProgress, the CLI's bar over trials with the best
    report.py     the result (toolkit.schema.tune.TuneResult, the JSON of --json) and the report
    verdict.py    the verdict against the preset it replaces, and the comments and warning of --out
    writeback.py  the tuned Environment, a round-trip YAML edit with a comment per tuned value

docs/tune.md describes the spec block, the search and the output.
"""
