"""Coding prompts: implement, complete, fix, refactor and test code, with real code as context.

Every snippet below was written for this project. Prompts combine a task with one to three files
of context, so lengths range from one sentence to a few hundred lines.
"""

from __future__ import annotations

import random

from toolkit.workloads.gen.snippets import FILES

SYSTEMS = [
    None,
    "You are a senior software engineer. Answer with code first, then a short explanation.",
    "You are a careful code reviewer. Keep the existing style and public interfaces.",
    "Reply with a unified diff only, no prose.",
]

# name -> (what is wrong as the user sees it, a hint of where)
BUGS = {
    "lru": ("put() on an existing key never updates hits/misses and the tests say the capacity is exceeded "
            "by one under concurrent writers", "Traceback: AssertionError: assert 5 <= 4 in test_capacity_threads"),
    "ratelimit": ("Allow() lets a burst of requests through after the process was idle for a long time, and "
                  "the first call after New() sometimes returns false", "go test -race ./... reports no race"),
    "orders": ("totalCents returns NaN when the coupon code is lower-case, and an unknown coupon silently "
               "gives no discount", "TypeError is never thrown; the UI shows 'NaN'"),
    "csvstats": ("the script crashes on files with a single row and on empty cells", "statistics.StatisticsError: "
                 "stdev requires at least two data points\nValueError: could not convert string to float: ''"),
    "parser": ("a value like `url = \"http://x/#top\"` is cut at the `#`, and negative numbers in sections "
               "are stored as text", "assertion failed: left: Text(\"http://x/\")"),
    "sql": ("categories with no sales in a month are missing from the dashboard and refunds are counted as "
            "revenue", "the finance team wants a zero row instead of a gap"),
    "deploy": ("a failed `docker stop` on a fresh host aborts the whole loop, and hosts.txt lines with spaces "
               "break the script", "bash: line 12: docker stop: No such container: web"),
    "events": ("a listener that removes itself during emit() makes the next listener get skipped",
               "expected both handlers to run, only the first ran"),
    "matrix": ("valgrind reports a memory leak for every matrix and matrix_mul does not check the dimensions",
               "==1234== definitely lost: 8,000 bytes in 1 blocks"),
    "api": ("DELETE /todos/999 returns 500 instead of 404, and list_todos loads every row at once",
            "sqlalchemy.orm.exc.UnmappedInstanceError: Class 'builtins.NoneType' is not mapped"),
}

REFACTORS = [
    "Split it into smaller functions with clear names, keeping the behaviour identical.",
    "Add type annotations everywhere and replace magic values with named constants.",
    "Make it testable: inject the clock, the filesystem or the network instead of using globals.",
    "Rewrite it to be idiomatic for its language and explain every change in one line each.",
    "Remove the duplication and make error handling consistent: no silent failures.",
]

TESTS = [
    "Write unit tests for it covering the normal path, the edge cases and the error paths.",
    "Write a property-based test (hypothesis, proptest, fast-check or similar) for its main invariant.",
    "Write a table-driven test with at least eight cases, including the boundaries.",
]

EXTEND = {
    "lru": "Add a time-to-live per entry, with `put(key, value, ttl_s=None)` and expired entries never returned.",
    "ratelimit": "Add `Wait(ctx context.Context) error` that blocks until a token is available or ctx is done.",
    "orders": "Add per-item tax rates by SKU prefix and return a breakdown {subtotal, discount, tax, total}.",
    "csvstats": "Add a --group-by COLUMN option that prints the statistics per group, sorted by group name.",
    "parser": "Support arrays written as `[1, 2, 3]` and quoted strings with escaped quotes.",
    "sql": "Add a column with the month-over-month growth in percent per category using a window function.",
    "deploy": "Deploy to the hosts in parallel, at most 4 at a time, and roll back a host whose health check fails.",
    "events": "Add `once(event, fn)` and an `error` event that receives exceptions thrown by listeners.",
    "matrix": "Add matrix_transpose and a cache-friendly matrix_mul that multiplies by the transposed matrix.",
    "api": "Add PATCH /todos/{id} for partial updates and pagination with ?limit= and ?offset= on the list.",
}

SHORT_SPECS = [
    ("python", "def merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:",
     "merge overlapping closed intervals and return them sorted"),
    ("python", "def parse_duration(text: str) -> float:", "turn '1h30m', '45s' or '2.5h' into seconds; raise ValueError otherwise"),
    ("python", "async def fetch_all(urls: list[str], limit: int = 8) -> list[bytes]:",
     "download every URL with aiohttp, at most `limit` at a time, keeping the order of `urls`"),
    ("typescript", "function debounce<T extends (...args: any[]) => void>(fn: T, ms: number): T",
     "call fn only after `ms` milliseconds without another call"),
    ("go", "func TopK(words []string, k int) []string", "return the k most frequent words, ties broken alphabetically"),
    ("rust", "fn rle_encode(input: &str) -> String", "run-length encode a string: 'aaabcc' -> '3a1b2c'"),
    ("python", "def topological_sort(graph: dict[str, list[str]]) -> list[str]:",
     "order the nodes so every edge goes forward; raise on a cycle and name the cycle"),
    ("javascript", "function deepEqual(a, b)", "compare plain objects, arrays, dates and primitives structurally"),
    ("sql", "a query over events(user_id, kind, at)", "find users whose first 'signup' was followed by a 'purchase' within 7 days"),
    ("bash", "a script rotate_logs.sh DIR DAYS", "gzip *.log files older than DAYS and delete .gz files older than 30 days"),
    ("python", "class RingBuffer:", "a fixed-size ring buffer with append, __len__, __iter__ oldest first, and mean()"),
    ("go", "func Retry(ctx context.Context, attempts int, fn func() error) error",
     "retry with exponential backoff and jitter, stopping early when ctx is cancelled"),
    ("c", "char *str_replace(const char *s, const char *old, const char *new)", "return a new string with every occurrence replaced"),
    ("typescript", "function groupBy<T, K extends string>(items: T[], key: (t: T) => K): Record<K, T[]>",
     "group items by the key, keeping their order"),
]

FENCE = "```"


def _block(name: str, cut: int | None = None) -> str:
    lang, fname, code = FILES[name]
    if cut is not None:
        lines = code.splitlines()
        code = "\n".join(lines[:cut]) + "\n"
    return f"{fname}:\n{FENCE}{lang}\n{code}{FENCE}"


def _context(rng: random.Random, main: str) -> str:
    extra: list[str] = []
    if rng.random() < 0.35:
        extra = rng.sample([k for k in FILES if k != main], k=rng.randint(1, 2))
    blocks = [_block(main)] + [_block(k) for k in extra]
    return "\n\n".join(blocks)


def make(rng: random.Random) -> tuple[list[dict], int]:
    """One coding prompt: (messages, target output length)."""
    kind = rng.choices(["implement", "complete", "fix", "refactor", "test", "extend", "review"],
                       weights=[3, 2, 3, 2, 2, 2, 1])[0]
    name = rng.choice(list(FILES))
    lang, fname, code = FILES[name]
    if kind == "implement":
        lang, sig, what = rng.choice(SHORT_SPECS)
        style = rng.choice(["", " Include docstrings.", " Handle invalid input explicitly.",
                            " Aim for O(n log n) or better and say why it is.", " Add two usage examples."])
        text = f"Implement this in {lang}:\n\n{FENCE}{lang}\n{sig}\n{FENCE}\n\nIt should {what}.{style}"
        out = rng.randint(200, 500)
    elif kind == "complete":
        cut = max(6, int(len(code.splitlines()) * rng.uniform(0.4, 0.8)))
        text = (f"Complete the rest of {fname}; the file stops mid-way. Keep the style.\n\n{_block(name, cut)}")
        out = rng.randint(150, 450)
    elif kind == "fix":
        symptom, evidence = BUGS[name]
        text = (f"{_context(rng, name)}\n\nBug report: {symptom}.\n\n{FENCE}\n{evidence}\n{FENCE}\n\n"
                f"Find the cause, fix {fname}, and add a regression test.")
        out = rng.randint(300, 800)
    elif kind == "refactor":
        text = f"Refactor {fname}. {rng.choice(REFACTORS)}\n\n{_context(rng, name)}"
        out = rng.randint(400, 1000)
    elif kind == "test":
        text = f"{rng.choice(TESTS)}\n\n{_block(name)}"
        out = rng.randint(300, 800)
    elif kind == "extend":
        text = f"{_context(rng, name)}\n\n{EXTEND[name]} Show the full updated {fname}."
        out = rng.randint(400, 1000)
    else:
        text = (f"Review this {lang} code like a pull request: list concrete problems by line, then propose a "
                f"patch.\n\n{_context(rng, name)}")
        out = rng.randint(300, 700)
    messages = []
    system = rng.choice(SYSTEMS)
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": text})
    return messages, out
