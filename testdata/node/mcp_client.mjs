// Drives belay's MCP server with the official MCP TypeScript SDK, as a
// coding agent would: over stdio (`belay mcp`) or streamable HTTP (/mcp).
// Usage: node mcp_client.mjs stdio BELAY_BIN PROJECT
//        node mcp_client.mjs http URL TOKEN PROJECT
// Prints one JSON line per check and exits 1 on the first failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, ...args] = process.argv.slice(2);
let transport, project;
if (mode === "stdio") {
  const [bin, dir] = args;
  project = dir;
  transport = new StdioClientTransport({ command: bin, args: ["mcp"], env: { ...process.env }, stderr: "inherit" });
} else {
  const [url, token, dir] = args;
  project = dir;
  transport = new StreamableHTTPClientTransport(new URL(url + "/mcp"), {
    requestInit: { headers: { Authorization: "Bearer " + token } },
  });
}

function check(name, ok, detail) {
  console.log(JSON.stringify({ check: name, ok, detail }));
  if (!ok) process.exit(1);
}

async function call(name, args) {
  const res = await client.callTool({ name, arguments: args });
  const text = res.content[0].text;
  return { isError: !!res.isError, body: JSON.parse(text), structured: res.structuredContent };
}

const client = new Client({ name: "belay-node-test", version: "1.0.0" });
await client.connect(transport);

const { tools } = await client.listTools();
const names = tools.map((t) => t.name);
for (const want of ["checkpoint_save", "checkpoint_list", "checkpoint_get", "checkpoint_diff", "checkpoint_rollback", "session_resume", "ask_human", "hitl_wait"]) {
  check("tool " + want, names.includes(want), names);
}
const save = tools.find((t) => t.name === "checkpoint_save");
check("save schema", save.inputSchema.properties.summary.maxLength === 500 &&
  JSON.stringify(save.inputSchema.required) === JSON.stringify(["summary", "project_path"]), save.inputSchema);

const saved = await call("checkpoint_save", { summary: "from the TypeScript SDK", project_path: project, tags: ["ts"], context: { client: "node" } });
check("save", !saved.isError && saved.body.id && saved.body.project_path === project && saved.body.tags[0] === "ts" &&
  "token_count" in saved.body && "updated_at" in saved.body, saved.body);
check("structured content", saved.structured && saved.structured.id === saved.body.id, saved.structured);

const listed = await call("checkpoint_list", { project_path: project, limit: 10 });
check("list", !listed.isError && listed.body.total >= 1 && listed.body.checkpoints.some((c) => c.id === saved.body.id), listed.body);

const got = await call("checkpoint_get", { id: saved.body.id });
check("get", !got.isError && got.body.summary === "from the TypeScript SDK", got.body);

const errors = [
  ["checkpoint_save", { summary: "", project_path: project }, "VALIDATION_ERROR", "summary"],
  ["checkpoint_save", { summary: "x".repeat(501), project_path: project }, "VALIDATION_ERROR", "summary"],
  ["checkpoint_save", { summary: "s" }, "VALIDATION_ERROR", "project_path"],
  ["checkpoint_list", { limit: 101 }, "VALIDATION_ERROR", "limit"],
  ["checkpoint_get", { id: "01890000-0000-7000-8000-000000000000" }, "NOT_FOUND", null],
];
for (const [tool, a, code, field] of errors) {
  const r = await call(tool, a);
  check(`error ${tool} ${code} ${field}`, r.isError && r.body.error.code === code &&
    (field === null || r.body.error.details.field === field), r.body);
}

if (process.env.EXPECT_RATE_LIMIT) {
  let limited = null;
  for (let i = 0; i < 30 && !limited; i++) {
    const r = await call("checkpoint_save", { summary: "burst " + i, project_path: project });
    if (r.isError && r.body.error.code === "RATE_LIMITED") limited = r.body;
  }
  check("rate limited", limited && limited.error.details.retryAfter > 0, limited);
}

await client.close();
check("done", true);
