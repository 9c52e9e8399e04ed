// The LangGraph.js side of bench/graph: the same 3-node workflow
// (plan → review with interrupt → finalize) on LangGraph's SQLite
// checkpointer, every step saved before the next ("sync" durability).
// Usage: node bench_graph.mjs DB N CONCURRENCY; prints one JSON line.
import { Annotation, Command, END, START, StateGraph, interrupt } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";

const [dbPath, nArg, concArg] = process.argv.slice(2);
const n = Number(nArg);
const concurrency = Number(concArg);

const State = Annotation.Root({
  topic: Annotation(),
  outline: Annotation(),
  verdict: Annotation(),
  final: Annotation(),
});

const app = new StateGraph(State)
  .addNode("plan", (s) => ({ outline: "outline for " + s.topic }))
  .addNode("review", (s) => {
    const decision = interrupt({ title: "Approve the plan?", message: s.outline });
    return { verdict: decision };
  })
  .addNode("finalize", (s) => ({ final: s.outline + " (" + s.verdict + ")" }))
  .addEdge(START, "plan")
  .addEdge("plan", "review")
  .addEdge("review", "finalize")
  .addEdge("finalize", END)
  .compile({ checkpointer: SqliteSaver.fromConnString(dbPath) });

const resumes = [];

async function one(i) {
  const config = { configurable: { thread_id: `run-${concurrency}-${i}` }, durability: "sync" };
  const paused = await app.invoke({ topic: "topic " + i }, config);
  if (!paused.__interrupt__) throw new Error(`run ${i} did not pause`);
  const t0 = performance.now();
  const done = await app.invoke(new Command({ resume: "approved" }), config);
  resumes.push(performance.now() - t0);
  if (done.final !== `outline for topic ${i} (approved)`) throw new Error(`run ${i} ended with ${JSON.stringify(done)}`);
}

let next = 0;
async function worker() {
  while (next < n) {
    await one(next++);
  }
}

const start = performance.now();
await Promise.all(Array.from({ length: concurrency }, worker));
const seconds = (performance.now() - start) / 1000;
resumes.sort((a, b) => a - b);
const pct = (p) => resumes[Math.min(resumes.length - 1, Math.floor((resumes.length * p) / 100))];
const db = app.checkpointer.db;
console.log(JSON.stringify({
  runs: n,
  seconds,
  runsPerSecond: n / seconds,
  resumeP50Ms: pct(50),
  resumeP99Ms: pct(99),
  journalMode: db.pragma("journal_mode", { simple: true }),
  synchronous: db.pragma("synchronous", { simple: true }),
}));
