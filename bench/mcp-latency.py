#!/usr/bin/env python3
"""Times `piidx mcp` tool calls against the CLI answering the same question.

Usage: bench/mcp-latency.py PIIDX DB [RUNS] [SESSION_ID]

One `piidx --db DB mcp` process serves every call (raw JSON-RPC over its
pipes; each call opens the index afresh, as the server always does); each
CLI figure is a whole `piidx --db DB ... --json` process. The two are run
alternately, RUNS times each, and the medians printed (milliseconds) with
their ratio. SESSION_ID (default: the newest session) is used for
get_session / show. Release builds only; say how loaded the machine was.
"""

import json
import os
import statistics
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    piidx, db = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    env = dict(os.environ, TZ="UTC")
    server = subprocess.Popen(
        [piidx, "--db", db, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    ids = iter(range(1, 1 << 30))

    def ask(method, params):
        message = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
        server.stdin.write(json.dumps(message).encode() + b"\n")
        server.stdin.flush()
        reply = json.loads(server.stdout.readline())
        if "error" in reply:
            sys.exit(f"{method} {params}: {reply['error']}")
        return reply["result"]

    ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "0"}})
    sessions = ask("tools/call", {"name": "list_sessions", "arguments": {"limit": 1}})
    session = sys.argv[4] if len(sys.argv) > 4 else sessions["structuredContent"]["sessions"][0]["id"]
    cases = [
        ("search", {"query": "error", "limit": 20}, ["search", "error", "-n", "20"]),
        ("list_sessions", {"limit": 50}, ["sessions", "--all", "--limit", "50"]),
        ("get_session", {"session": session, "tool_output_chars": 0, "max_bytes": 4194304},
         ["show", session]),
        ("usage", {"by": "model"}, ["usage", "--by", "model"]),
    ]
    print(f"# piidx mcp vs CLI, {runs} runs each, alternating; medians in ms")
    print(f"# load average at start: {os.getloadavg()}")
    print("| tool | mcp call | CLI process | CLI / mcp |")
    print("|---|---|---|---|")
    for name, arguments, cli in cases:
        mcp_times, cli_times = [], []
        for _ in range(runs):
            start = time.perf_counter()
            ask("tools/call", {"name": name, "arguments": arguments})
            mcp_times.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            subprocess.run([piidx, "--db", db, *cli, "--json"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=env)
            cli_times.append((time.perf_counter() - start) * 1000)
        m, c = statistics.median(mcp_times), statistics.median(cli_times)
        print(f"| {name} | {m:.2f} | {c:.2f} | {c / m:.2f} |")
    print(f"# load average at end: {os.getloadavg()}")
    server.stdin.close()
    server.wait()


if __name__ == "__main__":
    main()
