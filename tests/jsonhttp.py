"""A stand-in HTTP server answering GETs with JSON, in a thread, for tests
of clients (htools' RAPI backend, the maintenance daemon reading the
monitoring daemons)."""

import http.server
import json
import threading


def serve_json(testcase, answer, address=("127.0.0.1", 0)):
    """Serve ``answer(path, headers)`` (a JSON value) on ``address`` until
    the test ends; returns ``"host:port"``."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(answer(self.path, self.headers)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(address, Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    testcase.addCleanup(server.server_close)
    testcase.addCleanup(server.shutdown)
    return "%s:%d" % server.server_address[:2]
