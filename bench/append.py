#!/usr/bin/env python3
"""Append one valid v3 `message` entry to each given Pi session file.

Usage: bench/append.py TAG FILE...

The new entry's parentId is the id of the file's current last entry (found by reading backwards to
the start of the last line and taking its first "id" field, so multi-MB last lines are cheap).
A header-only file gets parentId null. The id is 8 hex chars derived from TAG+path+size (deterministic,
collision-checked against the last id only, which is enough for a benchmark).
"""
import hashlib, json, os, re, sys, time

ID_RE = re.compile(rb'^\{"type":"([^"]*)"(?:,"id":"([^"]*)")?')


def last_line_start(f, size):
    pos = size
    # skip the trailing newline
    if size > 0:
        f.seek(size - 1)
        if f.read(1) == b"\n":
            pos = size - 1
    chunk = 1 << 16
    while pos > 0:
        start = max(0, pos - chunk)
        f.seek(start)
        buf = f.read(pos - start)
        i = buf.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        pos = start
    return 0


def append(path, tag, text=None):
    """Append one user message (by default the benchmark sentence naming TAG) to PATH."""
    now_ms = int(time.time() * 1000)
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now_ms / 1000)) + ".%03dZ" % (now_ms % 1000)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(last_line_start(f, size))
        head = f.read(256)
    m = ID_RE.match(head)
    parent = None
    if m and m.group(1) != b"session" and m.group(2):
        parent = m.group(2).decode()
    new_id = hashlib.sha1(f"{tag}\0{path}\0{size}".encode()).hexdigest()[:8]
    if new_id == parent:
        new_id = new_id[::-1]
    entry = {
        "type": "message",
        "id": new_id,
        "parentId": parent,
        "timestamp": iso,
        "message": {
            "role": "user",
            "content": [{"type": "text", "text": text or f"benchmark append {tag}: please rerun the failing test"}],
            "timestamp": now_ms,
        },
    }
    with open(path, "ab") as f:
        f.write(json.dumps(entry, separators=(",", ":")).encode() + b"\n")


def main():
    for path in sys.argv[2:]:
        append(path, sys.argv[1])


if __name__ == "__main__":
    main()
