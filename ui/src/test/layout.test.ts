/// <reference types="vite/client" />
// One test layout: every UI test sits under src/test (helpers beside them), none beside the
// code. A test written elsewhere fails here instead of running in a second layout.
import { describe, expect, it } from "vitest";

describe("test layout", () => {
  it("keeps every test under src/test", () => {
    const all = Object.keys(import.meta.glob("../**/*.test.{ts,tsx}"));
    expect(all.length).toBeGreaterThan(20);
    expect(all.filter((p) => !p.startsWith("./"))).toEqual([]);
  });
});
