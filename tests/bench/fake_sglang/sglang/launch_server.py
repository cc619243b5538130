"""A fake `python -m sglang.launch_server` for launcher tests: prints its exact argv, serves /health
and /server_info on --host/--port, and exits with code 7 when given --crash-after-start."""
import http.server
import json
import sys

argv = sys.argv[1:]
print("FAKE-SGLANG-ARGV " + json.dumps(argv), flush=True)


def opt(name, default=None):
    return argv[argv.index(name) + 1] if name in argv else default


if "--crash-after-start" in argv:
    print("fatal: simulated crash during start", flush=True)
    sys.exit(7)


class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health":
            body = b"ok"
        elif self.path == "/server_info":
            body = json.dumps({"version": "0.0.fake", "internal_states": [{"max_running_requests": 48}],
                               "argv": argv}).encode()
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        print("request " + fmt % args, flush=True)


http.server.HTTPServer((opt("--host", "127.0.0.1"), int(opt("--port", "30000"))), H).serve_forever()
