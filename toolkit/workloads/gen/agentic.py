"""Agentic prompts: multi-turn tool use in OpenAI chat format (tools, tool calls, tool results, JSON).

Each prompt is a conversation stopped where the model must act next: after a tool result (call the
next tool or answer) or after a new user instruction. Tool results are generated records of varied
size, so contexts range from a few hundred to several thousand tokens.
"""

from __future__ import annotations

import json
import random

from toolkit.workloads.gen.snippets import FILES


# json-edge: a tool's JSON schema
def tool(name: str, desc: str, params: dict[str, tuple[str, str]], required: list[str] | None = None) -> dict:
    props = {k: {"type": t, "description": d} for k, (t, d) in params.items()}
    return {"type": "function", "function": {
        "name": name, "description": desc,
        "parameters": {"type": "object", "properties": props, "required": required or list(params)}}}


NAMES = ["Ana Ruiz", "Bo Chen", "Chidi Okafor", "Dana Levi", "Emil Novak", "Fatima Zahra", "Goran Petrov",
         "Hana Sato", "Ines Costa", "Jonas Berg", "Kiri Walker", "Lena Vogel"]
CITIES = ["Lisbon", "Osaka", "Nairobi", "Montreal", "Krakow", "Santiago", "Hanoi", "Reykjavik", "Perth", "Tbilisi"]
SERVICES = ["checkout", "search-api", "auth", "billing-worker", "image-resizer", "notifications"]


def _cid(rng: random.Random) -> str:
    return f"call_{rng.randrange(16 ** 10):010x}"


class Convo:
    def __init__(self, rng: random.Random, system: str, user: str):
        self.rng = rng
        self.messages: list[dict] = [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def call(self, name: str, args: dict, result, thought: str | None = None) -> None:
        cid = _cid(self.rng)
        self.messages.append({"role": "assistant", "content": thought, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        body = result if isinstance(result, str) else json.dumps(result, indent=self.rng.choice([None, 2]))
        self.messages.append({"role": "tool", "tool_call_id": cid, "content": body})


JSON_ASKS = [
    'When you are done, reply with only a JSON object: {"status": "done"|"blocked", "summary": str, "actions": [str]}.',
    'Finish with a JSON object {"answer": ..., "confidence": 0-1, "evidence": [tool_call_id, ...]} and nothing else.',
    "",
    "Explain briefly what you did after the last tool call.",
]


def support(rng: random.Random) -> tuple[Convo, list[dict]]:
    tools = [tool("lookup_customer", "Find a customer by e-mail", {"email": ("string", "e-mail address")}),
             tool("get_orders", "List a customer's orders", {"customer_id": ("string", "id"), "limit": ("integer", "max")}),
             tool("issue_refund", "Refund part or all of an order", {"order_id": ("string", "id"),
                  "amount_cents": ("integer", "amount"), "reason": ("string", "shown to the customer")}),
             tool("send_email", "E-mail the customer", {"to": ("string", "address"), "subject": ("string", "s"),
                  "body": ("string", "plain text")})]
    name = rng.choice(NAMES)
    email = name.lower().replace(" ", ".") + "@example.com"
    c = Convo(rng, "You are a support agent for an online shop. Use the tools; refunds over 200 EUR need a "
              "manager, so do not issue them. " + rng.choice(JSON_ASKS),
              f"Hi, this is {name} ({email}). My last order arrived with a broken {rng.choice(['kettle', 'lamp', 'chair', 'monitor', 'blender'])} "
              f"and {rng.choice(['I want my money back', 'I would like a replacement', 'nobody answered my mail'])}.")
    cust = f"C{rng.randint(10000, 99999)}"
    c.call("lookup_customer", {"email": email}, {"customer_id": cust, "name": name, "since": f"20{rng.randint(15, 25)}",
                                                  "tier": rng.choice(["basic", "gold"])})
    orders = [{"order_id": f"O{rng.randint(100000, 999999)}", "total_cents": rng.randint(999, 45000),
               "status": rng.choice(["delivered", "shipped", "returned"]), "items": rng.randint(1, 5)}
              for _ in range(rng.randint(2, 25))]
    c.call("get_orders", {"customer_id": cust, "limit": 25}, {"orders": orders}, thought="Let me look at the orders.")
    if rng.random() < 0.5:
        o = orders[0]
        amount = min(o["total_cents"], 20000)
        c.call("issue_refund", {"order_id": o["order_id"], "amount_cents": amount, "reason": "damaged item"},
               {"refund_id": f"R{rng.randint(1000, 9999)}", "status": "pending"})
    return c, tools


def analyst(rng: random.Random) -> tuple[Convo, list[dict]]:
    tools = [tool("list_tables", "List tables in the warehouse", {}),
             tool("describe_table", "Columns and types of a table", {"table": ("string", "name")}),
             tool("run_sql", "Run a read-only SQL query; returns rows as JSON", {"query": ("string", "SQL")})]
    q = rng.choice(["Which product category grew fastest last quarter?", "What share of revenue comes from repeat customers?",
                    "Which weekday has the highest cancellation rate?", "Are refunds concentrated in a few SKUs?"])
    c = Convo(rng, "You are a data analyst agent with read-only access to a Postgres warehouse. "
              + rng.choice(JSON_ASKS), q)
    tables = ["orders", "line_items", "products", "categories", "customers", "refunds", "sessions", "events"]
    c.call("list_tables", {}, {"tables": tables})
    c.call("describe_table", {"table": "orders"}, {"columns": [
        {"name": n, "type": t} for n, t in [("id", "bigint"), ("customer_id", "bigint"), ("status", "text"),
                                             ("created_at", "timestamptz"), ("total_cents", "integer")]]})
    rows = [{"month": f"2025-{m:02d}", "category": rng.choice(["garden", "kitchen", "toys", "office"]),
             "revenue_cents": rng.randint(10 ** 5, 10 ** 8), "orders": rng.randint(10, 9000)}
            for m in range(1, rng.randint(4, 13)) for _ in range(rng.randint(1, 4))]
    c.call("run_sql", {"query": "SELECT date_trunc('month', created_at) AS month, category, SUM(total_cents) ..."},
           {"rows": rows, "row_count": len(rows)})
    return c, tools


def incident(rng: random.Random) -> tuple[Convo, list[dict]]:
    tools = [tool("get_alerts", "Firing alerts for a service", {"service": ("string", "name")}),
             tool("get_logs", "Recent log lines", {"service": ("string", "name"), "since_minutes": ("integer", "window"),
                  "level": ("string", "minimum level")}),
             tool("get_metrics", "A metric as (minute, value) points", {"service": ("string", "name"), "metric": ("string", "name")}),
             tool("restart_service", "Rolling restart", {"service": ("string", "name"), "reason": ("string", "why")})]
    svc = rng.choice(SERVICES)
    c = Convo(rng, "You are the on-call SRE assistant. Diagnose before acting; never restart without evidence. "
              + rng.choice(JSON_ASKS), f"Pager: {svc} p99 latency above 2s for 10 minutes. Please investigate.")
    c.call("get_alerts", {"service": svc}, {"alerts": [{"name": "HighLatencyP99", "since": "09:41Z", "value": round(rng.uniform(2, 9), 2)}]})
    errs = ["upstream timeout after 5000ms", "connection pool exhausted (max=50)", "GC pause 1.8s",
            "retrying request to db-primary", "slow query 3.2s: SELECT * FROM carts WHERE ..."]
    lines = [f"2025-11-0{rng.randint(1, 9)}T09:{rng.randint(30, 59)}:{rng.randint(10, 59)}Z "
             f"{rng.choice(['WARN', 'ERROR', 'INFO'])} {svc}[{rng.randint(1, 8)}] {rng.choice(errs)}"
             for _ in range(rng.randint(10, 120))]
    c.call("get_logs", {"service": svc, "since_minutes": 30, "level": "WARN"}, "\n".join(lines),
           thought="The alert is real; checking the logs for the cause.")
    if rng.random() < 0.6:
        pts = [[i, round(rng.uniform(0.2, 9.0), 2)] for i in range(rng.randint(10, 60))]
        c.call("get_metrics", {"service": svc, "metric": "db_pool_in_use"}, {"points": pts})
    return c, tools


def repo(rng: random.Random) -> tuple[Convo, list[dict]]:
    tools = [tool("read_file", "Read a file of the repository", {"path": ("string", "relative path")}),
             tool("search_code", "Search the repository", {"query": ("string", "regex")}),
             tool("run_tests", "Run the test suite or one test file", {"target": ("string", "path or 'all'")}),
             tool("apply_patch", "Apply a unified diff", {"diff": ("string", "the patch")})]
    name = rng.choice(list(FILES))
    lang, fname, code = FILES[name]
    c = Convo(rng, "You are a coding agent working in a git repository. Make the smallest change that fixes the "
              "problem, run the tests, then stop. " + rng.choice(JSON_ASKS),
              f"CI is red on main since this morning; the failure is in the tests for {fname}. Please fix it.")
    c.call("run_tests", {"target": "all"}, {"passed": rng.randint(40, 400), "failed": 1, "output":
           f"FAILED tests/test_{fname.split('/')[-1].split('.')[0]}.py::test_edge_case - AssertionError"})
    c.call("search_code", {"query": fname.split("/")[-1].split(".")[0]},
           {"matches": [{"path": fname, "line": rng.randint(1, 30)}, {"path": f"tests/test_{name}.py", "line": rng.randint(1, 60)}]})
    c.call("read_file", {"path": fname}, {"path": fname, "content": code})
    return c, tools


def travel(rng: random.Random) -> tuple[Convo, list[dict]]:
    tools = [tool("search_flights", "Search flights", {"origin": ("string", "city"), "destination": ("string", "city"),
                  "date": ("string", "YYYY-MM-DD")}),
             tool("get_weather", "Forecast for a city and date", {"city": ("string", "city"), "date": ("string", "date")}),
             tool("book_flight", "Book a flight", {"flight_id": ("string", "id"), "passenger": ("string", "full name")})]
    a, b = rng.sample(CITIES, 2)
    date = f"2026-0{rng.randint(3, 9)}-{rng.randint(10, 28)}"
    c = Convo(rng, "You are a travel assistant. Confirm with the user before booking anything. " + rng.choice(JSON_ASKS),
              f"I need to get from {a} to {b} around {date}, cheapest option under {rng.randint(3, 9)}00 EUR, no red-eyes.")
    flights = [{"flight_id": f"{rng.choice(['TP', 'LH', 'QR', 'AC'])}{rng.randint(100, 999)}", "depart": f"{rng.randint(5, 23):02d}:{rng.choice(['05', '30', '45'])}",
                "stops": rng.randint(0, 2), "price_eur": rng.randint(120, 1100)} for _ in range(rng.randint(3, 30))]
    c.call("search_flights", {"origin": a, "destination": b, "date": date}, {"flights": flights})
    c.call("get_weather", {"city": b, "date": date}, {"high_c": rng.randint(-5, 35), "rain_mm": rng.randint(0, 20)})
    if rng.random() < 0.4:
        c.messages.append({"role": "assistant", "content": f"The best match is {flights[0]['flight_id']}. Shall I book it?"})
        c.messages.append({"role": "user", "content": rng.choice(["Yes, book it for me, name as on my profile.",
                                                                  "Is there anything with one stop that is cheaper?"])})
    return c, tools


SCENARIOS = [support, analyst, incident, repo, travel]


def make(rng: random.Random) -> tuple[list[dict], list[dict], int]:
    """One agentic prompt: (messages, tools, target output length)."""
    convo, tools = rng.choice(SCENARIOS)(rng)
    return convo.messages, tools, rng.randint(64, 400)
