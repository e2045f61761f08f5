"""Network cost of ``allowlist`` mode: requests through the egress proxy vs direct (``open``).

Measures, with bubblewrap sandboxes and a loopback HTTP server as "the outside":

* ``command true``      — one ``true`` command (the supervisor and relay start in
  ``allowlist`` mode; nothing does in ``open``);
* ``command + 1 GET``   — one command that makes one request (``python`` with urllib):
  what an agent's ``bash`` call that fetches something costs end to end;
* ``GET in a loop``     — per-request cost inside one long-running process (warm
  interpreter, new connection each time): relay → UNIX socket → proxy → upstream.

Run::

    .venv/bin/python bench/network_proxy.py [--commands 30] [--requests 300]
"""

from __future__ import annotations

import argparse
import http.server
import tempfile
import threading
from pathlib import Path

from timing import summary, timings

from deerflow.config.paths import ThreadPaths
from deerflow.config.schema import SandboxConfig
from deerflow.sandbox.execution.bwrap import BwrapSandboxProvider, find_bwrap
from deerflow.sandbox.factory import make_egress_proxy
from deerflow.sandbox.network.policy import CallScope

LOOP = """
import sys, time, urllib.request
url, n = sys.argv[1], int(sys.argv[2])
urllib.request.urlopen(url).read()
samples = []
for _ in range(n):
    start = time.perf_counter()
    urllib.request.urlopen(url).read()
    samples.append(time.perf_counter() - start)
print(" ".join(f"{s:.6f}" for s in samples))
"""


def _server() -> tuple[http.server.ThreadingHTTPServer, int]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:
            body = b"x" * 1024
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]






def measure(provider: BwrapSandboxProvider, paths: ThreadPaths, host: str, port: int,
            *, commands: int, requests: int) -> dict[str, list[float]]:
    """All measurements for one provider (its network mode decides the path)."""
    url = f"http://{host}:{port}/"
    (paths.workspace / "loop.py").write_text(LOOP)
    fetch = f"python -c \"import urllib.request; urllib.request.urlopen('{url}').read()\""
    provider.execute(paths, fetch)  # warm-up
    results = {
        "command true": timings(lambda: provider.execute(paths, "true"), commands),
        "command + 1 GET": timings(lambda: provider.execute(paths, fetch), commands),
    }
    loop = provider.execute(paths, f"python loop.py {url} {requests}", timeout=600)
    results["GET in a loop"] = [float(s) for s in loop.output.split()]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commands", type=int, default=30, help="commands per metric")
    parser.add_argument("--requests", type=int, default=300, help="requests in the loop")
    args = parser.parse_args()
    if not find_bwrap():
        raise SystemExit("bwrap is not installed: nothing to measure")
    server, port = _server()
    table: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="deerflow-bench-") as tmp:
        paths = ThreadPaths(Path(tmp) / "t").ensure()
        direct = BwrapSandboxProvider(network="open")
        try:
            table["open (direct)"] = measure(direct, paths, "127.0.0.1", port,
                                             commands=args.commands, requests=args.requests)
        finally:
            direct.close()
        egress = make_egress_proxy(SandboxConfig(network="allowlist", allowed_hosts=["outside.test"],
                                                 egress_hosts={"outside.test": "127.0.0.1"}))
        proxied = BwrapSandboxProvider(network="allowlist", egress=egress)
        try:
            with egress.scope(paths.root, CallScope("bench", may_ask=False, denial_reason="unattended")):
                table["allowlist (proxy)"] = measure(proxied, paths, "outside.test", port,
                                                     commands=args.commands, requests=args.requests)
        finally:
            proxied.close()
    server.shutdown()
    names = list(table)
    print(f"{'metric':<16} | " + " | ".join(f"{n:<28}" for n in names))
    for metric in ("command true", "command + 1 GET", "GET in a loop"):
        print(f"{metric:<16} | " + " | ".join(f"{summary(table[n][metric]):<28}" for n in names))
    print(f"samples: commands={args.commands} requests={args.requests}")


if __name__ == "__main__":
    main()
