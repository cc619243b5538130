"""Coding prompts: implement, complete, fix, refactor and test code, with real code as context.

Every snippet below was written for this project. Prompts combine a task with one to three files
of context, so lengths range from one sentence to a few hundred lines.
"""

from __future__ import annotations

import random

SYSTEMS = [
    None,
    "You are a senior software engineer. Answer with code first, then a short explanation.",
    "You are a careful code reviewer. Keep the existing style and public interfaces.",
    "Reply with a unified diff only, no prose.",
]

# name -> (language, filename, code)
FILES = {
    "lru": ("python", "cache.py", '''from collections import OrderedDict
from threading import Lock


class LRUCache:
    """A thread-safe least-recently-used cache with a fixed capacity."""

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self._data: OrderedDict[str, bytes] = OrderedDict()
        self._lock = Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> bytes | None:
        with self._lock:
            if key not in self._data:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return self._data[key]

    def put(self, key: str, value: bytes) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            if len(self._data) > self.capacity:
                self._data.popitem(last=False)
'''),
    "ratelimit": ("go", "ratelimit.go", '''package ratelimit

import (
	"sync"
	"time"
)

// Bucket is a token bucket: Rate tokens per second, at most Burst saved up.
type Bucket struct {
	mu     sync.Mutex
	Rate   float64
	Burst  float64
	tokens float64
	last   time.Time
}

func New(rate, burst float64) *Bucket {
	return &Bucket{Rate: rate, Burst: burst, tokens: burst, last: time.Now()}
}

// Allow reports whether one request may pass now, and takes a token if so.
func (b *Bucket) Allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.tokens += now.Sub(b.last).Seconds() * b.Rate
	if b.tokens > b.Burst {
		b.tokens = b.Burst
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
'''),
    "orders": ("typescript", "orders.ts", '''export interface LineItem {
  sku: string;
  quantity: number;
  unitPriceCents: number;
}

export interface Order {
  id: string;
  customerId: string;
  items: LineItem[];
  couponCode?: string;
  createdAt: Date;
}

const COUPONS: Record<string, number> = { WELCOME10: 0.1, SPRING25: 0.25 };

export function subtotalCents(order: Order): number {
  return order.items.reduce((sum, item) => sum + item.quantity * item.unitPriceCents, 0);
}

export function totalCents(order: Order): number {
  const subtotal = subtotalCents(order);
  const discount = order.couponCode ? COUPONS[order.couponCode] ?? 0 : 0;
  return Math.round(subtotal * (1 - discount));
}

export async function fetchOrders(customerId: string): Promise<Order[]> {
  const res = await fetch(`/api/customers/${customerId}/orders`);
  if (!res.ok) throw new Error(`orders: HTTP ${res.status}`);
  const raw = await res.json();
  return raw.map((o: any) => ({ ...o, createdAt: new Date(o.createdAt) }));
}
'''),
    "csvstats": ("python", "report.py", '''import csv
import statistics
import sys


def load(path):
    rows = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            rows.append(row)
    return rows


def summarize(rows, column):
    values = [float(r[column]) for r in rows]
    return {
        "n": len(values),
        "mean": statistics.mean(values),
        "median": statistics.median(values),
        "stdev": statistics.stdev(values),
    }


def main(argv):
    path, column = argv[1], argv[2]
    rows = load(path)
    stats = summarize(rows, column)
    for key, value in stats.items():
        print(f"{key:>8}: {value:.3f}")


if __name__ == "__main__":
    main(sys.argv)
'''),
    "parser": ("rust", "src/config.rs", '''use std::collections::HashMap;
use std::fs;

#[derive(Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Bool(bool),
    Text(String),
}

/// Parses `key = value` lines; `#` starts a comment; sections are `[name]`.
pub fn parse(src: &str) -> Result<HashMap<String, Value>, String> {
    let mut out = HashMap::new();
    let mut section = String::new();
    for (n, raw) in src.lines().enumerate() {
        let line = raw.split('#').next().unwrap().trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('[') && line.ends_with(']') {
            section = line[1..line.len() - 1].to_string();
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .ok_or(format!("line {}: expected key = value", n + 1))?;
        let key = if section.is_empty() { k.trim().to_string() } else { format!("{}.{}", section, k.trim()) };
        let v = v.trim();
        let value = if let Ok(i) = v.parse::<i64>() {
            Value::Int(i)
        } else if v == "true" || v == "false" {
            Value::Bool(v == "true")
        } else {
            Value::Text(v.trim_matches('"').to_string())
        };
        out.insert(key, value);
    }
    Ok(out)
}

pub fn load(path: &str) -> Result<HashMap<String, Value>, String> {
    let src = fs::read_to_string(path).map_err(|e| e.to_string())?;
    parse(&src)
}
'''),
    "sql": ("sql", "queries/monthly_revenue.sql", '''-- Revenue per month and product category, for the finance dashboard.
SELECT
    date_trunc('month', o.created_at) AS month,
    c.name                            AS category,
    SUM(li.quantity * li.unit_price)  AS revenue,
    COUNT(DISTINCT o.id)              AS orders
FROM orders o
JOIN line_items li ON li.order_id = o.id
JOIN products p    ON p.id = li.product_id
JOIN categories c  ON c.id = p.category_id
WHERE o.status = 'paid'
  AND o.created_at >= now() - interval '12 months'
GROUP BY 1, 2
ORDER BY 1, 3 DESC;
'''),
    "deploy": ("bash", "scripts/deploy.sh", '''#!/usr/bin/env bash
set -euo pipefail

APP=${1:?usage: deploy.sh APP VERSION}
VERSION=${2:?usage: deploy.sh APP VERSION}
REGISTRY=registry.internal:5000

docker build -t "$REGISTRY/$APP:$VERSION" .
docker push "$REGISTRY/$APP:$VERSION"

for host in $(cat hosts.txt); do
  ssh "$host" "docker pull $REGISTRY/$APP:$VERSION && docker stop $APP; docker rm $APP; \\
    docker run -d --name $APP -p 8080:8080 $REGISTRY/$APP:$VERSION"
done
echo "deployed $APP $VERSION"
'''),
    "events": ("javascript", "src/emitter.js", '''class Emitter {
  constructor() {
    this.listeners = new Map();
  }

  on(event, fn) {
    if (!this.listeners.has(event)) this.listeners.set(event, []);
    this.listeners.get(event).push(fn);
    return () => this.off(event, fn);
  }

  off(event, fn) {
    const list = this.listeners.get(event) || [];
    this.listeners.set(event, list.filter((f) => f !== fn));
  }

  emit(event, ...args) {
    for (const fn of this.listeners.get(event) || []) {
      fn(...args);
    }
  }
}

module.exports = { Emitter };
'''),
    "matrix": ("c", "matrix.c", '''#include <stdio.h>
#include <stdlib.h>

typedef struct {
    int rows, cols;
    double *data;
} Matrix;

Matrix *matrix_new(int rows, int cols) {
    Matrix *m = malloc(sizeof(Matrix));
    m->rows = rows;
    m->cols = cols;
    m->data = calloc(rows * cols, sizeof(double));
    return m;
}

Matrix *matrix_mul(const Matrix *a, const Matrix *b) {
    Matrix *c = matrix_new(a->rows, b->cols);
    for (int i = 0; i < a->rows; i++)
        for (int j = 0; j < b->cols; j++)
            for (int k = 0; k < a->cols; k++)
                c->data[i * c->cols + j] += a->data[i * a->cols + k] * b->data[k * b->cols + j];
    return c;
}

void matrix_free(Matrix *m) {
    free(m);
}
'''),
    "api": ("python", "app/routes.py", '''from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel
from sqlalchemy.orm import Session

from app.db import get_session
from app.models import Todo

router = APIRouter(prefix="/todos")


class TodoIn(BaseModel):
    title: str
    done: bool = False


@router.get("/")
def list_todos(db: Session = Depends(get_session)):
    return db.query(Todo).all()


@router.post("/", status_code=201)
def create_todo(body: TodoIn, db: Session = Depends(get_session)):
    todo = Todo(title=body.title, done=body.done)
    db.add(todo)
    db.commit()
    return todo


@router.delete("/{todo_id}")
def delete_todo(todo_id: int, db: Session = Depends(get_session)):
    todo = db.get(Todo, todo_id)
    db.delete(todo)
    db.commit()
    return {"deleted": todo_id}
'''),
}

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
