// Times the same calls through @trpc/client (httpBatchLink) and through
// /v1 with fetch, against one belay server, and prints the ratio of the
// medians of five alternated rounds; then the
// time until 1,000 SSE subscribers of stream.hitlRequired each hear of one
// new request. Run by `go run ./bench/trpc` from the module root.
import { createTRPCClient, httpBatchLink, httpLink, httpSubscriptionLink, splitLink } from "@trpc/client";
import { EventSource } from "eventsource";

const [base, token, n, subscribers] = [process.argv[2], process.argv[3], Number(process.argv[4]), Number(process.argv[5])];
const auth = { Authorization: "Bearer " + token };
class AuthedEventSource extends EventSource {
  constructor(url, init) {
    super(url, { ...init, fetch: (u, i) => fetch(u, { ...i, headers: { ...i.headers, ...auth } }) });
  }
}
const trpc = createTRPCClient({
  links: [splitLink({
    condition: (op) => op.type === "subscription",
    true: httpSubscriptionLink({ url: base + "/trpc", EventSource: AuthedEventSource }),
    false: httpBatchLink({ url: base + "/trpc", headers: () => auth }),
  })],
});
// One call a request, as /v1 does: the server-side cost compared alone
// (httpBatchLink waits a tick to gather a batch, which one sequential call pays).
const single = createTRPCClient({ links: [httpLink({ url: base + "/trpc", headers: () => auth })] });
const v1 = async (method, path, body) => {
  const r = await fetch(base + path, { method, headers: { ...auth, "Content-Type": "application/json" }, body: body && JSON.stringify(body) });
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return r.json();
};
const task = await trpc.sessions.create.mutate({ title: "bench" });

async function time(label, fn) {
  for (let i = 0; i < 20; i++) await fn(i); // warm up
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await fn(i);
  const ms = performance.now() - t0;
  return { label, perSecond: n / (ms / 1000), msEach: ms / n };
}
// Batches of 8 list calls, as a dashboard would send.
const batch = () => Promise.all(Array.from({ length: 8 }, () => trpc.checkpoints.list.query({ taskId: task.id, limit: 20 })));
const batchV1 = () => Promise.all(Array.from({ length: 8 }, () => v1("GET", `/v1/checkpoints?sessionId=${task.id}&limit=20`)));
const create = (i) => single.checkpoints.create.mutate({ taskId: task.id, type: "manual", trigger: "user_request", description: "bench " + i, workspaceRef: "" });
const createV1 = (i) => v1("POST", "/v1/checkpoints", { sessionId: task.id, summary: "bench " + i });

// Five rounds of each pair, the order alternating, to share the machine's
// noise (and the JIT's warming) evenly; medians are printed.
const rounds = 5;
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
const results = [];
for (const [a, b] of [[["create via tRPC (httpLink)", create], ["create via /v1", createV1]], [["8 lists batched via tRPC", batch], ["8 lists via /v1", batchV1]]]) {
  const ra = [], rb = [];
  for (let r = 0; r < rounds; r++) {
    if (r % 2 === 0) {
      ra.push(await time(...a));
      rb.push(await time(...b));
    } else {
      rb.push(await time(...b));
      ra.push(await time(...a));
    }
  }
  const summary = (label, rs) => {
    const perSecond = median(rs.map((x) => x.perSecond));
    return { label, perSecond, msEach: 1000 / perSecond };
  };
  const sa = summary(a[0], ra), sb = summary(b[0], rb);
  results.push({ ...sa, ratio: sb.perSecond / sa.perSecond }, sb);
}
for (const r of results) {
  console.log(`${r.label.padEnd(28)} ${r.perSecond.toFixed(0).padStart(6)}/s  ${r.msEach.toFixed(2)} ms` +
    (r.ratio ? `   cost vs /v1: ${((r.ratio - 1) * 100).toFixed(1)}% (target ≤ 10%)` : ""));
}

// Fan-out: every subscriber must hear of one new request.
let heard = 0;
const subs = [];
let resolveAll;
const all = new Promise((r) => (resolveAll = r));
let target = null;
let ready = 0;
for (let i = 0; i < subscribers; i++) {
  subs.push(trpc.stream.hitlRequired.subscribe(undefined, {
    onStarted: () => ready++,
    onData: (e) => { if (e.checkpointId === target && ++heard === subscribers) resolveAll(); },
  }));
}
while (ready < subscribers) await new Promise((r) => setTimeout(r, 20));
const t0 = performance.now();
const cp = await trpc.checkpoints.create.mutate({ taskId: task.id, type: "hitl", trigger: "user_request", description: "fan-out", workspaceRef: "",
  hitl: { required: true, title: "fan-out" } });
target = cp.id;
await all;
console.log(`fan-out to ${subscribers} SSE subscribers (stream.hitlRequired): all heard in ${(performance.now() - t0).toFixed(0)} ms`);
subs.forEach((s) => s.unsubscribe());
process.exit(0);
