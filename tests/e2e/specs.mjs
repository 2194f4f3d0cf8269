// The e2e specs, by concern, in specs/. Each gets a fresh app (new KASTEN_HOME, new driver,
// new session); run.mjs runs them by name.
export * from "./specs/start.mjs";
export * from "./specs/transfer.mjs";
export * from "./specs/graph.mjs";
export * from "./specs/agents.mjs";
export * from "./specs/time.mjs";
