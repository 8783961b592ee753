"""Drives `piidx mcp` with the official MCP Python SDK (PyPI `mcp`): its
stdio client starts the server, its ClientSession speaks the protocol.

Used by tests/it/mcp.rs, which compares what this prints with the CLI's
`--json` answers. Usage:

    python3 tests/mcp_client.py PIIDX DB PLAN MODE [TRANSCRIPT]

PLAN is a JSON file: a list of calls, each {"name", "arguments", "pages"
(how many pages to fetch at most, following next_cursor)}. MODE is
`initialize` (the handshake, 2025-11-25 from this SDK) or `discover`
(2026-07-28: server/discover, then the _meta envelope on every request).
Prints one JSON object: the negotiated version, server info, the tools,
and per call the structuredContent of each page (or the JSON-RPC error).
TRANSCRIPT, if given, gets every message sent and received, one per line.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client


def dump(message):
    """A SessionMessage's JSON-RPC message as plain JSON."""
    inner = getattr(message, "message", message)
    try:
        return inner.model_dump(by_alias=True, mode="json", exclude_none=True)
    except AttributeError:
        return repr(inner)


class TapRead:
    """A read stream that logs what it yields."""

    def __init__(self, stream, log):
        self.stream, self.log = stream, log

    async def receive(self):
        item = await self.stream.receive()
        self.log.append(("<-", dump(item)))
        return item

    async def aclose(self):
        await self.stream.aclose()

    def __aiter__(self):
        return self

    async def __anext__(self):
        item = await self.stream.__anext__()
        self.log.append(("<-", dump(item)))
        return item

    async def __aenter__(self):
        await self.stream.__aenter__()
        return self

    async def __aexit__(self, *exc):
        return await self.stream.__aexit__(*exc)


class TapWrite:
    """A write stream that logs what it sends."""

    def __init__(self, stream, log):
        self.stream, self.log = stream, log

    async def send(self, item):
        self.log.append(("->", dump(item)))
        await self.stream.send(item)

    async def aclose(self):
        await self.stream.aclose()

    async def __aenter__(self):
        await self.stream.__aenter__()
        return self

    async def __aexit__(self, *exc):
        return await self.stream.__aexit__(*exc)


async def main(piidx, db, plan_path, mode, transcript):
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    env = {key: os.environ[key] for key in ("TZ", "HOME") if key in os.environ}
    server = StdioServerParameters(command=piidx, args=["--db", db, "mcp"], env=env)
    log = []
    out = {"calls": []}
    async with stdio_client(server) as (read, write):
        async with ClientSession(TapRead(read, log), TapWrite(write, log)) as session:
            if mode == "discover":
                found = await session.discover()
                out["supported_versions"] = found.supported_versions
            else:
                init = await session.initialize()
                out["server_info"] = init.server_info.model_dump(mode="json", exclude_none=True)
                out["instructions"] = init.instructions
            out["protocol_version"] = session.protocol_version
            tools = await session.list_tools()
            out["tools"] = [
                tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in tools.tools
            ]
            for call in plan:
                arguments = dict(call.get("arguments", {}))
                pages = []
                record = {"name": call["name"], "arguments": call.get("arguments", {}), "pages": pages}
                try:
                    for _ in range(call.get("pages", 1)):
                        result = await session.call_tool(call["name"], arguments)
                        structured = result.structured_content
                        text = json.loads(result.content[0].text)
                        record["text_matches"] = record.get("text_matches", True) and text == structured
                        record["is_error"] = result.is_error
                        pages.append(structured)
                        cursor = (structured or {}).get("next_cursor")
                        if not cursor:
                            break
                        arguments["cursor"] = cursor
                except MCPError as err:
                    record["error"] = {"code": err.code, "message": err.message}
                out["calls"].append(record)
    if transcript:
        with open(transcript, "w", encoding="utf-8") as f:
            for direction, message in log:
                f.write(f"{direction} {json.dumps(message, ensure_ascii=False)}\n")
    json.dump(out, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) not in (4, 5):
        sys.exit(__doc__)
    asyncio.run(main(*args[:4], args[4] if len(args) == 5 else None))
