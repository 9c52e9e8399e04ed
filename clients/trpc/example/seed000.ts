// Seed 000's own snippets, typed against belay's router: `npm run check`
// fails when a procedure's input or output drifts from what they use.
import { createTRPCClient, httpBatchLink, TRPCClientError } from "@trpc/client";
import superjson from "superjson";
import type { AppRouter, AppRouterSuperJSON, PendingHITL } from "../src/index";

const trpc = createTRPCClient<AppRouter>({
  links: [httpBatchLink({ url: "http://127.0.0.1:7420/trpc", headers: { Authorization: "Bearer belay_…" } })],
});

export async function seedExamples(taskId: string): Promise<void> {
  const checkpoint = await trpc.checkpoints.get.query("checkpoint-uuid");
  const title: string | undefined = checkpoint.hitlConfig?.title;
  console.log(title, checkpoint.hitlDecision === null);

  const result = await trpc.checkpoints.list.query({ taskId, hitlRequired: true, hitlDecided: false, limit: 10 });
  const total: number = result.totalCount;
  console.log(total, result.nextCursor, result.hasMore, result.items[0]?.description);

  const pending = await trpc.checkpoints.getHITLPending.query({});
  console.log(pending.map((p) => p.task.prompt));

  const created = await trpc.checkpoints.create.mutate({
    taskId, type: "hitl", trigger: "phase_change", description: "Architecture decision required", workspaceRef: "9fceb02d0ae598e95dc970b74767f19372d61af8",
    hitl: {
      required: true, title: "Architecture Decision", message: "Choose the database architecture for the project.",
      options: [{ id: "postgresql", label: "PostgreSQL", description: "Relational database", action: "approve", isDefault: true }],
      timeout: { duration: 3600, defaultAction: "approve" },
    },
  });
  const decision = await trpc.checkpoints.decide.mutate({ checkpointId: created.id, action: "approve", selectedOption: "postgresql",
    feedback: "PostgreSQL is better for our use case due to complex reporting needs." });
  console.log(decision.decision.responseTime, decision.task.status);

  const restored = await trpc.checkpoints.restore.mutate({ checkpointId: created.id, reason: "Implementation went in wrong direction" });
  const files: string[] = restored.restoredFiles;
  console.log(files);

  try {
    await trpc.checkpoints.decide.mutate({ checkpointId: created.id, action: "approve", selectedOption: "invalid-option" });
  } catch (error) {
    if (error instanceof TRPCClientError && error.data?.appCode === "INVALID_OPTION") {
      console.error("Selected option is not valid for this checkpoint");
    }
  }

  trpc.stream.hitlRequired.subscribe(undefined, {
    onData: (event) => console.log(event.title, event.message, event.checkpointId),
  });
}

export async function handleHITLCheckpoint(checkpoint: PendingHITL): Promise<void> {
  const { hitlConfig } = checkpoint.checkpoint;
  console.log(`\n${hitlConfig?.title}`);
  console.log(hitlConfig?.message);
  for (const option of hitlConfig?.options ?? []) {
    console.log(option.isDefault ? `* ${option.label}` : `  ${option.label}`);
  }
}

const sj = createTRPCClient<AppRouterSuperJSON>({
  links: [httpBatchLink({ url: "http://127.0.0.1:7420/trpc-superjson", transformer: superjson })],
});

export async function dates(id: string): Promise<Date> {
  const cp = await sj.checkpoints.get.query(id);
  return cp.createdAt;
}
