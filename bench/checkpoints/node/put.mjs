// Measures LangGraph.js's SQLite checkpoint saver: n sequential put calls of
// one thread, each with the agent state read from stdin as its channel
// values. Prints one JSON line: puts per second and the saver's settings.
//
//	node put.mjs <dbpath> <n> <synchronous: default|full|normal> < state.json
import { readFileSync } from "node:fs";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { uuid6 } from "@langchain/langgraph-checkpoint";

const [path, count, synchronous] = process.argv.slice(2);
const n = Number(count);
const state = JSON.parse(readFileSync(0, "utf8"));
const saver = SqliteSaver.fromConnString(path);
saver.setup();
if (synchronous !== "default") {
	saver.db.pragma(`synchronous=${synchronous}`);
}
const config = { configurable: { thread_id: "bench", checkpoint_ns: "" } };

async function put(i, cfg) {
	const checkpoint = {
		v: 4,
		id: uuid6(i),
		ts: new Date().toISOString(),
		channel_values: { state },
		channel_versions: { state: i + 1 },
		versions_seen: {},
	};
	return saver.put(cfg, checkpoint, { source: "loop", step: i, parents: {} }, { state: i + 1 });
}

let cfg = config;
for (let i = 0; i < 100; i++) {
	cfg = await put(i, cfg);
}
const start = process.hrtime.bigint();
for (let i = 100; i < 100 + n; i++) {
	cfg = await put(i, cfg);
}
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
console.log(JSON.stringify({
	putsPerSecond: n / seconds,
	journalMode: saver.db.pragma("journal_mode", { simple: true }),
	synchronous: saver.db.pragma("synchronous", { simple: true }),
	sqlite: saver.db.prepare("SELECT sqlite_version() AS v").get().v,
}));
