#!/usr/bin/env node
// Replay a piidx bench corpus through Pi's own SessionManager (@mariozechner/pi-coding-agent@0.73.1), so the
// resulting session tree is written by Pi's code (its JSON.stringify, its append/lazy-flush path, its ids, its
// per-cwd directory names) rather than by our generator.
//
// Usage: node bench/pi-tree.mjs SRC OUT
//   SRC  a corpus root (e.g. made by target/release/examples/gen_corpus): <SRC>/<cwd-dir>/*.jsonl. Read only.
//   OUT  output sessions root; must not exist or be empty. Pi writes OUT/<Pi's dir name for the cwd>/<ts>_<uuid>.jsonl.
// Env: PITREE_REAL_CLOCK=1  use the wall clock for Pi's timestamps (default: Pi's `new Date()`/`Date.now()` are
//                           pinned to each source entry's timestamp while it is appended, so file names and entry
//                           timestamps follow the source corpus; ids stay Pi's random ones).
//      PITREE_LIMIT_BYTES=N  stop after replaying source files totalling >= N bytes (for a subset tree).
//      PI_NODE_MODULES=dir   where @mariozechner/pi-coding-agent is installed (default: bench/node_modules).
//
// How each source entry is replayed (ids are Pi's fresh ones; a per-session map old id -> new id keeps references):
//   session header       -> SessionManager.create(cwd, OUT/<dir>) (+ newSession({parentSession}) when the source
//                           header has one; the path is mapped to the replayed parent's new file when known)
//   message              -> appendMessage(same message object)
//   model_change         -> appendModelChange(provider, modelId)
//   thinking_level_change-> appendThinkingLevelChange(thinkingLevel)
//   compaction           -> appendCompaction(summary, mapped firstKeptEntryId, tokensBefore, details, fromHook)
//                           (v1 firstKeptEntryIndex is mapped through the line index, as Pi's migrateV1ToV2 does)
//   branch_summary       -> branchWithSummary(mapped parentId, summary, details, fromHook)  [Pi sets fromId=parentId]
//   label                -> appendLabelChange(mapped targetId, label)
//   session_info         -> appendSessionInfo(name)
//   custom               -> appendCustomEntry(customType, data)
//   custom_message       -> appendCustomMessageEntry(customType, content, display, details)
//   anything else        -> SessionManager._appendEntry({...entry, id: new, parentId: leaf, timestamp}) (the same
//                           persistence path every appendXxx uses; cf. fixtures/generate/pi152-lib.mjs appendRawEntry)
// Tree shape: before appending, if the source parentId (mapped) is not Pi's current leaf, sm.branch(mapped parentId)
// (sm.resetLeaf() for a null parentId). v1 sessions (no ids) are a linear chain; their header's provider/modelId/
// thinkingLevel become a leading model_change / thinking_level_change.
// Pi writes lazily: nothing reaches disk until the session's first assistant message; sessions without one produce
// no file (Pi's behaviour, kept). subagent-artifacts directories are skipped.
// Streams: source files are read line by line; only Pi's own in-memory copy of the current session is held.
import { createReadStream, existsSync, mkdirSync, readdirSync, statSync, mkdtempSync, rmSync } from "node:fs";
import { createInterface } from "node:readline";
import { join, resolve, basename } from "node:path";
import { tmpdir } from "node:os";
import { randomUUID } from "node:crypto";

const [srcArg, outArg] = process.argv.slice(2);
if (!srcArg || !outArg) {
	process.stderr.write("usage: node bench/pi-tree.mjs SRC OUT\n");
	process.exit(2);
}
const SRC = resolve(srcArg);
const OUT = resolve(outArg);
if (existsSync(OUT) && readdirSync(OUT).length > 0) {
	process.stderr.write(`pi-tree: ${OUT} exists and is not empty\n`);
	process.exit(2);
}
mkdirSync(OUT, { recursive: true });
const REAL_CLOCK = process.env.PITREE_REAL_CLOCK === "1";
const LIMIT = process.env.PITREE_LIMIT_BYTES ? Number(process.env.PITREE_LIMIT_BYTES) : Infinity;

// ---------------------------------------------------------------- clock: Pi timestamps follow the source entries
const RealDate = Date;
let NOW = null; // null = wall clock
if (!REAL_CLOCK) {
	class SourceDate extends RealDate {
		constructor(...args) {
			if (args.length === 0 && NOW !== null) super(NOW);
			else super(...args);
		}
		static now() {
			return NOW !== null ? NOW : RealDate.now();
		}
	}
	globalThis.Date = SourceDate;
}
function setClock(ts) {
	if (REAL_CLOCK) return;
	const t = typeof ts === "string" ? RealDate.parse(ts) : typeof ts === "number" ? ts : NaN;
	if (Number.isFinite(t)) NOW = t;
}

// ---------------------------------------------------------------- Pi's SessionManager (deep path, not in "exports")
const nm = resolve(process.env.PI_NODE_MODULES ?? new URL("./node_modules", import.meta.url).pathname);
const smPath = join(nm, "@mariozechner/pi-coding-agent/dist/core/session-manager.js");
if (!existsSync(smPath)) {
	process.stderr.write(`pi-tree: ${smPath} missing (run npm install in bench/ or set PI_NODE_MODULES)\n`);
	process.exit(2);
}
const { SessionManager, getDefaultSessionDir } = await import(new URL(`file://${smPath}`).href);

// Pi's per-cwd directory name: getDefaultSessionDir(cwd, agentDir) = <agentDir>/sessions/--...-- (it mkdirs it, so
// point it at a scratch agent dir and keep only the last component).
const scratchAgent = mkdtempSync(join(tmpdir(), "pi-tree-agent-"));
const dirNames = new Map();
function piDirName(cwd) {
	let n = dirNames.get(cwd);
	if (n === undefined) {
		n = basename(getDefaultSessionDir(cwd, scratchAgent));
		dirNames.set(cwd, n);
	}
	return n;
}

// ---------------------------------------------------------------- source files (Pi listAll layout: SRC/<dir>/*.jsonl)
const files = [];
let skippedDirs = 0;
for (const d of readdirSync(SRC, { withFileTypes: true })) {
	if (!d.isDirectory()) continue;
	if (d.name === "subagent-artifacts") {
		skippedDirs++;
		continue;
	}
	for (const f of readdirSync(join(SRC, d.name), { withFileTypes: true })) {
		if (f.isDirectory() && f.name === "subagent-artifacts") skippedDirs++;
		if (!f.isFile() || !f.name.endsWith(".jsonl")) continue;
		files.push(join(SRC, d.name, f.name));
	}
}
// Global order by file name (<timestamp>_<uuid>.jsonl), so a parentSession is usually replayed before its child.
files.sort((a, b) => (basename(a) < basename(b) ? -1 : basename(a) > basename(b) ? 1 : a < b ? -1 : 1));

const srcToOut = new Map(); // source file path -> Pi's session file path
const stats = {
	sessions: 0,
	lazyNoFile: 0,
	srcBytes: 0,
	entries: 0,
	byType: {},
	branches: 0,
	raw: 0,
	orphans: 0,
	badLines: 0,
	parentSessionMapped: 0,
	parentSessionKept: 0,
};
const bump = (k) => (stats.byType[k] = (stats.byType[k] ?? 0) + 1);

function newRawId(sm) {
	for (;;) {
		const id = randomUUID().slice(0, 8);
		if (!sm.getEntry(id)) return id;
	}
}

async function replay(file) {
	const rl = createInterface({ input: createReadStream(file, { encoding: "utf8" }), crlfDelay: Infinity });
	let sm = null;
	let v1 = false;
	const idMap = new Map(); // source id -> Pi id
	const lineIds = []; // v1: line index -> Pi id (header at 0), for firstKeptEntryIndex
	let lineNo = -1;
	for await (const line of rl) {
		lineNo++;
		if (line.trim() === "") continue;
		let e;
		try {
			e = JSON.parse(line);
		} catch {
			stats.badLines++;
			continue;
		}
		if (sm === null) {
			if (e.type !== "session") {
				stats.badLines++;
				continue;
			}
			setClock(e.timestamp);
			const cwd = typeof e.cwd === "string" ? e.cwd : "/unknown";
			sm = SessionManager.create(cwd, join(OUT, piDirName(cwd)));
			if (typeof e.parentSession === "string") {
				const mapped = srcToOut.get(resolve(e.parentSession));
				if (mapped) stats.parentSessionMapped++;
				else stats.parentSessionKept++;
				sm.newSession({ parentSession: mapped ?? e.parentSession });
			}
			v1 = (e.version ?? 1) < 2;
			if (v1) {
				if (e.provider && e.modelId) sm.appendModelChange(e.provider, e.modelId);
				if (e.thinkingLevel) sm.appendThinkingLevelChange(e.thinkingLevel);
			}
			lineIds[lineNo] = null;
			continue;
		}
		if (e.type === "session") {
			stats.badLines++; // second header: not a Pi shape; skip
			continue;
		}
		setClock(e.timestamp);
		// Tree shape: move Pi's leaf to the (mapped) source parent when it differs.
		if (!v1 && "parentId" in e && e.type !== "branch_summary") {
			const want = e.parentId === null ? null : idMap.get(e.parentId);
			if (e.parentId !== null && want === undefined) stats.orphans++; // unknown parent: append at current leaf
			else if (want !== sm.getLeafId()) {
				if (want === null) sm.resetLeaf();
				else sm.branch(want);
				stats.branches++;
			}
		}
		let id;
		switch (e.type) {
			case "message":
				id = sm.appendMessage(e.message);
				break;
			case "model_change":
				id = sm.appendModelChange(e.provider, e.modelId);
				break;
			case "thinking_level_change":
				id = sm.appendThinkingLevelChange(e.thinkingLevel);
				break;
			case "compaction": {
				let kept = e.firstKeptEntryId !== undefined ? idMap.get(e.firstKeptEntryId) : undefined;
				if (kept === undefined && typeof e.firstKeptEntryIndex === "number") kept = lineIds[e.firstKeptEntryIndex] ?? undefined;
				id = sm.appendCompaction(e.summary, kept ?? e.firstKeptEntryId, e.tokensBefore, e.details, e.fromHook);
				break;
			}
			case "branch_summary": {
				let from = e.parentId ?? null;
				if (from !== null) from = idMap.get(from) ?? sm.getLeafId();
				if (from !== sm.getLeafId()) stats.branches++;
				id = sm.branchWithSummary(from, e.summary, e.details, e.fromHook);
				break;
			}
			case "label": {
				const target = idMap.get(e.targetId);
				if (target !== undefined) {
					id = sm.appendLabelChange(target, e.label);
					break;
				}
				id = appendRaw(sm, e);
				break;
			}
			case "session_info":
				id = sm.appendSessionInfo(typeof e.name === "string" ? e.name : "");
				break;
			case "custom":
				id = sm.appendCustomEntry(e.customType, e.data);
				break;
			case "custom_message":
				id = sm.appendCustomMessageEntry(e.customType, e.content, e.display, e.details);
				break;
			default:
				id = appendRaw(sm, e);
		}
		bump(e.type);
		stats.entries++;
		if (e.id !== undefined) idMap.set(e.id, id);
		lineIds[lineNo] = id;
	}
	if (sm !== null) {
		stats.sessions++;
		srcToOut.set(file, sm.getSessionFile());
		if (!existsSync(sm.getSessionFile())) stats.lazyNoFile++;
	}
}

function appendRaw(sm, e) {
	const { id: _id, parentId: _p, timestamp, type, ...rest } = e;
	const entry = { type, id: newRawId(sm), parentId: sm.getLeafId(), timestamp: new Date().toISOString(), ...rest };
	sm._appendEntry(entry);
	stats.raw++;
	return entry.id;
}

const t0 = process.hrtime.bigint();
let done = 0;
for (const f of files) {
	if (stats.srcBytes >= LIMIT) break;
	const size = statSync(f).size;
	await replay(f);
	stats.srcBytes += size;
	done++;
	if (process.stderr.isTTY && done % 50 === 0) process.stderr.write(`\r${done}/${files.length}`);
}
const secs = Number(process.hrtime.bigint() - t0) / 1e9;
NOW = null;
rmSync(scratchAgent, { recursive: true, force: true });

let outFiles = 0;
let outBytes = 0;
for (const d of readdirSync(OUT, { withFileTypes: true })) {
	if (!d.isDirectory()) continue;
	for (const f of readdirSync(join(OUT, d.name))) {
		outFiles++;
		outBytes += statSync(join(OUT, d.name, f)).size;
	}
}
const report = {
	src: SRC,
	out: OUT,
	srcFilesReplayed: done,
	srcFilesTotal: files.length,
	filesWritten: outFiles,
	sessionsWithoutFile: stats.lazyNoFile,
	srcBytes: stats.srcBytes,
	outBytes,
	seconds: Number(secs.toFixed(2)),
	entries: stats.entries,
	byType: stats.byType,
	branchMoves: stats.branches,
	rawAppends: stats.raw,
	orphanParents: stats.orphans,
	badLines: stats.badLines,
	parentSession: { mapped: stats.parentSessionMapped, keptAsIs: stats.parentSessionKept },
	skippedSubagentDirs: skippedDirs,
	clock: REAL_CLOCK ? "wall" : "source timestamps",
};
process.stdout.write(
	`pi-tree: ${outFiles} files written (${stats.sessions} sessions replayed from ${done}/${files.length} source files), ` +
		`OUT ${(outBytes / 1e6).toFixed(1)} MB vs SRC ${(stats.srcBytes / 1e6).toFixed(1)} MB, ${secs.toFixed(1)} s\n`,
);
process.stdout.write(`${JSON.stringify(report)}\n`);
