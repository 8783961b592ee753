#!/usr/bin/env node
// Time Pi's own SessionManager.listAll() (@mariozechner/pi-coding-agent@0.73.1) over a sessions root.
// Usage: node bench/listall.mjs <sessionsRoot> [iterations]
// Prints one JSON object: {"sessions": N, "ms": [per-iteration ms...]} (timed in-process, node start-up excluded).
//
// 0.73.1's listAll() takes no directory: it reads <PI_CODING_AGENT_DIR>/sessions (getSessionsDir), and lists the
// .jsonl files directly inside each immediate subdirectory. So we make a temporary agent dir whose `sessions` entry
// is a symlink to the corpus root. listAll() has no cache: each call re-reads and parses every file.
import { mkdtempSync, symlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const root = resolve(process.argv[2] ?? ".");
const iterations = Number(process.argv[3] ?? 3);
const agentDir = mkdtempSync(join(tmpdir(), "piidx-bench-agent-"));
symlinkSync(root, join(agentDir, "sessions"));
process.env.PI_CODING_AGENT_DIR = agentDir;
try {
	const { SessionManager } = await import(
		new URL("./node_modules/@mariozechner/pi-coding-agent/dist/core/session-manager.js", import.meta.url).href
	);
	const ms = [];
	let n = 0;
	for (let i = 0; i < iterations; i++) {
		const t0 = process.hrtime.bigint();
		const infos = await SessionManager.listAll();
		ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
		n = infos.length;
	}
	process.stdout.write(`${JSON.stringify({ sessions: n, ms })}\n`);
} finally {
	rmSync(agentDir, { recursive: true, force: true });
}
