"""Source files used as real code context by the coding and agentic prompts (written for this project)."""

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
