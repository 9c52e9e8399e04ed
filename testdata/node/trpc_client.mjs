// Drives belay's tRPC endpoint with the real @trpc/client (v11), as a
// TypeScript app written against seed 000's router would, over every link:
// httpBatchLink, httpLink, httpSubscriptionLink (SSE) and wsLink, with plain
// JSON and with superjson.
// Usage: node trpc_client.mjs URL TOKEN PROJECT
// Prints one JSON line per check and exits 1 on the first failure.
import {
  createTRPCClient, httpBatchLink, httpLink, httpSubscriptionLink, splitLink, createWSClient, wsLink, TRPCClientError,
} from "@trpc/client";
import superjson from "superjson";
import { EventSource } from "eventsource";
import WebSocket from "ws";

const [base, token, project] = process.argv.slice(2);
const auth = { Authorization: "Bearer " + token };

function check(name, ok, detail) {
  console.log(JSON.stringify({ check: name, ok: !!ok, detail: ok ? undefined : detail }));
  if (!ok) process.exit(1);
}

// EventSource with the token: the eventsource package takes a custom fetch.
class AuthedEventSource extends EventSource {
  constructor(url, init) {
    super(url, { ...init, fetch: (u, i) => fetch(u, { ...i, headers: { ...i.headers, ...auth } }) });
  }
}

function client(path, opts = {}) {
  const url = base + path;
  const transformer = opts.superjson ? superjson : undefined;
  const http = opts.single ? httpLink({ url, headers: () => auth, transformer }) : httpBatchLink({ url, headers: () => auth, transformer });
  return createTRPCClient({
    links: [splitLink({
      condition: (op) => op.type === "subscription",
      true: httpSubscriptionLink({ url, EventSource: AuthedEventSource, transformer }),
      false: http,
    })],
  });
}

async function expectError(name, promise, code, appCode, field) {
  try {
    await promise;
    check(name, false, "no error");
  } catch (e) {
    const ok = e instanceof TRPCClientError && e.data?.code === code && (!appCode || e.data?.appCode === appCode) &&
      (!field || e.data?.details?.field === field);
    check(name, ok, { message: e.message, data: e.data });
  }
}

const trpc = client("/trpc");
const task = await trpc.sessions.create.mutate({ projectPath: project, title: "Create REST API for todo management" });
check("sessions.create", task.id && task.title.startsWith("Create REST"), task);

// Seed 000's create example, its placeholder "git-commit-hash" a commit id:
// a workspace ref names a commit, never a name git would resolve.
await expectError("a workspaceRef that is no commit id", trpc.checkpoints.create.mutate({ taskId: task.id, type: "manual",
  trigger: "user_request", description: "d", workspaceRef: "git-commit-hash" }), "BAD_REQUEST", "VALIDATION_ERROR", "workspaceRef");
const created = await trpc.checkpoints.create.mutate({
  taskId: task.id, type: "hitl", trigger: "phase_change", description: "Architecture decision required", workspaceRef: "9fceb02d0ae598e95dc970b74767f19372d61af8",
  hitl: {
    required: true, title: "Architecture Decision", message: "Choose the database architecture for the project.",
    options: [
      { id: "postgresql", label: "PostgreSQL", description: "Relational database, good for complex queries", action: "approve", isDefault: true },
      { id: "mongodb", label: "MongoDB", description: "Document database, good for flexible schemas", action: "approve", isDefault: false },
    ],
    timeout: { duration: 3600, defaultAction: "approve" },
  },
});
check("checkpoints.create", created.taskId === task.id && created.description === "Architecture decision required" &&
  created.hitlDecision === null && created.hitlConfig.options.length === 2 && typeof created.createdAt === "string", created);

const got = await trpc.checkpoints.get.query(created.id);
check("checkpoints.get", got.id === created.id && got.hitlRequired === true && JSON.stringify(got.metadata) === "{}", got);

const list = await trpc.checkpoints.list.query({ taskId: task.id, hitlRequired: true, hitlDecided: false, limit: 10 });
check("checkpoints.list", list.items.length === 1 && list.totalCount === 1 && list.hasMore === false && list.nextCursor === null, list);

const pending = await trpc.checkpoints.getHITLPending.query({});
check("checkpoints.getHITLPending", pending.some((p) => p.checkpoint.id === created.id && p.task.prompt === task.title &&
  p.task.readable === true && p.timeRemaining > 3500), pending);

// Seed 000's error example: the code is under error.data.
await expectError("decide INVALID_OPTION", trpc.checkpoints.decide.mutate({ checkpointId: created.id, action: "approve", selectedOption: "invalid-option" }),
  "BAD_REQUEST", "INVALID_OPTION");
await expectError("get non-UUID", trpc.checkpoints.get.query("cp-123"), "BAD_REQUEST", "VALIDATION_ERROR", "input");
await expectError("list limit 1000", trpc.checkpoints.list.query({ limit: 1000 }), "BAD_REQUEST", "VALIDATION_ERROR", "limit");
await expectError("get unknown", trpc.checkpoints.get.query("01890000-0000-7000-8000-000000000000"), "NOT_FOUND", "CHECKPOINT_NOT_FOUND");
await expectError("unknown procedure", trpc.checkpoints.nope.query(), "NOT_FOUND");
const noAuth = createTRPCClient({ links: [httpLink({ url: base + "/trpc" })] });
await expectError("no token", noAuth.checkpoints.list.query({}), "UNAUTHORIZED", "UNAUTHENTICATED");

// A batch mixing success and failure: httpBatchLink sends them in one request (207).
const [okRes, badRes] = await Promise.allSettled([trpc.checkpoints.get.query(created.id), trpc.checkpoints.get.query("x")]);
check("batch mixed", okRes.status === "fulfilled" && badRes.status === "rejected" && badRes.reason.data.httpStatus === 400, [okRes, badRes]);
const raw = await fetch(base + "/trpc/checkpoints.get,checkpoints.get?batch=1&input=" +
  encodeURIComponent(JSON.stringify({ 0: created.id, 1: "x" })), { headers: auth });
check("batch status 207", raw.status === 207, raw.status);

// stream.hitlRequired over SSE: the pending request first, then a new one live.
const seen = [];
const sub = trpc.stream.hitlRequired.subscribe(undefined, {
  onData: (event) => seen.push(event),
  onError: (err) => check("hitlRequired error", false, err),
});
const waitFor = async (cond, what) => {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 25));
  check(what, cond(), seen);
};
await waitFor(() => seen.some((e) => e.checkpointId === created.id && e.title === "Architecture Decision" && e.readable === true),
  "hitlRequired pending first");
const second = await trpc.checkpoints.create.mutate({ taskId: task.id, type: "hitl", trigger: "user_request", description: "Deploy?",
  workspaceRef: "", hitl: { required: true, title: "Deploy to prod?" } });
await waitFor(() => seen.some((e) => e.checkpointId === second.id && e.options.length > 0), "hitlRequired live");
sub.unsubscribe();

// Seed 000's decide from the dashboard card, and the CLI flow's restore.
const decided = await trpc.checkpoints.decide.mutate({ checkpointId: created.id, action: "approve", selectedOption: "postgresql",
  feedback: "PostgreSQL is better for our use case due to complex reporting needs." });
check("checkpoints.decide", decided.decision.selectedOption === "postgresql" && decided.checkpoint.hitlDecision.id === decided.decision.id &&
  decided.task.id === task.id, decided);
await expectError("decide twice", trpc.checkpoints.decide.mutate({ checkpointId: created.id, action: "approve", selectedOption: "postgresql" }),
  "CONFLICT", "HITL_ALREADY_DECIDED");
// The seed's workspaceRef names a commit of the project's own git, no snapshot
// of belay's: a label, so restoring it rolls back the agent state alone.
const labelled = await trpc.checkpoints.restore.mutate({ checkpointId: created.id });
check("restore a label", labelled.checkpoint.id === created.id && labelled.restoredFiles.length === 0 && labelled.stateOnly === true, labelled);
const restored = await trpc.checkpoints.restore.mutate({ checkpointId: second.id, reason: "Implementation went in wrong direction" });
check("checkpoints.restore", restored.task.id === task.id && restored.checkpoint.id === second.id && Array.isArray(restored.restoredFiles), restored);
const del = await trpc.checkpoints.delete.mutate(second.id);
check("checkpoints.delete", del.deleted === true, del);

// stream.events resumes after the last id it saw, missing nothing.
const first = [];
let last = null;
const s1 = trpc.stream.events.subscribe({ sessionId: task.id, after: 0 }, { onData: (e) => { first.push(e); last = e.id; } });
await waitFor(() => first.length >= 5, "events replay");
s1.unsubscribe();
await trpc.checkpoints.create.mutate({ taskId: task.id, type: "manual", trigger: "user_request", description: "after the drop", workspaceRef: "" });
const rest = [];
const s2 = trpc.stream.events.subscribe({ sessionId: task.id, lastEventId: last }, { onData: (e) => rest.push(e) });
await waitFor(() => rest.some((e) => e.data.type === "checkpoint.created"), "events resume");
s2.unsubscribe();
check("events no gap", Number(rest[0].id) === Number(last) + 1 && rest.every((e, i) => i === 0 || Number(e.id) === Number(rest[i - 1].id) + 1), { last, rest });

// httpLink (one call a request) and superjson (dates arrive as Date).
const single = client("/trpc", { single: true });
check("httpLink", (await single.checkpoints.get.query(created.id)).id === created.id);
const sj = client("/trpc-superjson", { superjson: true });
const sjGot = await sj.checkpoints.get.query(created.id);
check("superjson dates", sjGot.createdAt instanceof Date && sjGot.hitlDecision.decidedAt instanceof Date, sjGot);
const sjList = await sj.checkpoints.list.query({ taskId: task.id, createdAfter: new Date(Date.parse(sjGot.createdAt) - 1000) });
check("superjson input dates", sjList.totalCount >= 1, sjList);
await expectError("superjson error", sj.checkpoints.get.query("x"), "BAD_REQUEST", "VALIDATION_ERROR");

// superjson leaves the documents belay keeps for its users as they were sent:
// a key named like a time stays a string, and a "__proto__" key (which
// superjson refuses in a meta path) breaks no read of its session. superjson
// drops that key itself as it reads the answer; plain JSON keeps it.
const lastRunAt = "2026-01-01T10:00:00.123456789+02:00";
const stamped = await trpc.checkpoints.create.mutate({ taskId: task.id, type: "manual", trigger: "user_request",
  description: "a state with a time in it", workspaceRef: "", agentState: { lastRunAt } });
const sjStamped = await sj.checkpoints.get.query(stamped.id);
check("superjson agentState as sent", sjStamped.agentState.lastRunAt === lastRunAt && sjStamped.createdAt instanceof Date, sjStamped);
const protoState = '{"__proto__":{"createdAt":"2026-01-01T00:00:00Z"}}';
const proto = await trpc.checkpoints.create.mutate({ taskId: task.id, type: "manual", trigger: "user_request",
  description: "a state with a __proto__ key", workspaceRef: "", agentState: JSON.parse(protoState) });
const plainProto = await trpc.checkpoints.get.query(proto.id);
check("__proto__ kept", JSON.stringify(plainProto.agentState) === protoState, plainProto);
const sjProto = await sj.checkpoints.get.query(proto.id);
check("superjson __proto__ get", sjProto.id === proto.id && sjProto.createdAt instanceof Date, sjProto);
const sjProtoList = await sj.checkpoints.list.query({ taskId: task.id, limit: 100 });
check("superjson __proto__ list", sjProtoList.items.some((c) => c.id === proto.id) &&
  sjProtoList.items.every((c) => c.createdAt instanceof Date), sjProtoList);

// wsLink with connectionParams, plain and superjson.
for (const [path, transformer] of [["/trpc", undefined], ["/trpc-superjson", superjson]]) {
  const wsClient = createWSClient({ url: base.replace("http", "ws") + path, WebSocket, connectionParams: { token } });
  const ws = createTRPCClient({ links: [wsLink({ client: wsClient, transformer })] });
  const viaWS = await ws.checkpoints.get.query(created.id);
  check("ws query " + path, viaWS.id === created.id && (!transformer || viaWS.createdAt instanceof Date), viaWS);
  const wsSeen = [];
  const wsSub = ws.stream.hitlRequired.subscribe(undefined, { onData: (e) => wsSeen.push(e) });
  const third = await ws.checkpoints.create.mutate({ taskId: task.id, type: "hitl", trigger: "user_request", description: "ws",
    workspaceRef: "", hitl: { required: true, title: "Over WebSocket" } });
  for (let i = 0; i < 200 && !wsSeen.some((e) => e.checkpointId === third.id); i++) await new Promise((r) => setTimeout(r, 25));
  check("ws subscription " + path, wsSeen.some((e) => e.checkpointId === third.id), wsSeen);
  await expectError("ws error " + path, ws.checkpoints.get.query("x"), "BAD_REQUEST", "VALIDATION_ERROR");
  wsSub.unsubscribe();
  wsClient.close();
}
const badWS = createWSClient({ url: base.replace("http", "ws") + "/trpc", WebSocket, connectionParams: { token: "belay_nope" } });
await expectError("ws bad token", createTRPCClient({ links: [wsLink({ client: badWS })] }).checkpoints.list.query({}), "UNAUTHORIZED");
badWS.close();

check("done", true);
process.exit(0);
