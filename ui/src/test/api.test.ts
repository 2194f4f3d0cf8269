// api.ts derives the wrapper from the generated `commands` as a whole: any command is there,
// unwrapped, without being listed (here commands the real shell does not have).
import { describe, expect, it, vi } from "vitest";

vi.mock("@tauri-apps/api/core", () => ({
  Channel: class {
    onmessage: (m: unknown) => void = () => {};
  },
}));
vi.mock("../bindings", () => ({
  commands: {
    answer: vi.fn(async (x: number) => ({ status: "ok", data: x * 2 })),
    refuse: vi.fn(async () => ({ status: "error", error: { kind: "invalid", message: "the note is empty" } })),
    withProgress: vi.fn(async (name: string, ch: { onmessage: (m: number) => void }) => {
      ch.onmessage(1);
      ch.onmessage(2);
      return { status: "ok", data: name };
    }),
  },
  events: {},
}));

const { api, abortable, ApiError } = await import("../api");
const { Channel } = await import("@tauri-apps/api/core");
const loose = api as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;

describe("api", () => {
  it("has every generated command, resolving with its value", async () => {
    expect(Object.keys(api).sort()).toEqual(["answer", "refuse", "withProgress"]);
    await expect(loose.answer(21)).resolves.toBe(42);
  });

  it("throws the shell's error as an ApiError with its kind and sentence", async () => {
    const e = await loose.refuse().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect((e as InstanceType<typeof ApiError>).kind).toBe("invalid");
    expect((e as Error).message).toBe("the note is empty");
  });

  it("turns a function given for a channel into a channel that calls it", async () => {
    const seen: number[] = [];
    await expect(loose.withProgress("m", (p: number) => seen.push(p))).resolves.toBe("m");
    expect(seen).toEqual([1, 2]);
    const { commands } = await import("../bindings");
    const ch = (commands as unknown as Record<string, ReturnType<typeof vi.fn>>).withProgress.mock.calls[0][1];
    expect(ch).toBeInstanceOf(Channel);
  });

  it("drops an answer nobody waits for: an aborted call rejects at once", async () => {
    const c = new AbortController();
    let settle: (v: string) => void = () => {};
    const p = abortable(new Promise<string>((r) => (settle = r)), c.signal);
    c.abort(new Error("superseded"));
    settle("late");
    await expect(p).rejects.toThrow("superseded");
    await expect(abortable(Promise.resolve("now"), new AbortController().signal)).resolves.toBe("now");
  });
});
