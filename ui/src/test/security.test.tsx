// Hostile note content (HTML, script, event handlers) is shown as text everywhere a note
// appears: the note detail (content, annotations the LLM wrote, link previews and reasons,
// history diffs) and the notes list. Nothing of it becomes an element, and no script runs.
import { screen, waitFor } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { note, renderWith } from "./util";

vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return {
    ...real,
    api: {
      getNote: vi.fn(),
      noteLifecycle: vi.fn().mockResolvedValue({ strength: 1, tier: "long-term", project: null, threshold: 0.2, fading: false, archived: false }),
      listNotes: vi.fn(),
      listTags: vi.fn().mockResolvedValue([]),
      listBoxes: vi.fn().mockResolvedValue([]),
      searchNotes: vi.fn(),
      loadSampleNotebook: vi.fn(),
      addNote: vi.fn(),
      appStatus: vi.fn().mockResolvedValue({ llm_configured: false, llm_label: "no LLM" }),
      llmOverview: vi.fn().mockResolvedValue({ in_use: {}, discovered: [], env_chooses: false }),
    },
  };
});

import { api } from "../api";
import NoteDetail from "../features/notes/NoteDetail";
import NotesView from "../features/notes/NotesView";

const mocked = api as unknown as Record<string, ReturnType<typeof vi.fn>>;

const SCRIPT = '<script>window.__pwned = "script"</script>';
const IMG = '<img src=x onerror="window.__pwned = \'img\'">';
const SVG = '<svg onload="window.__pwned = \'svg\'"><a href="javascript:alert(1)">x</a></svg>';
const IFRAME = '<iframe src="javascript:window.__pwned = \'iframe\'"></iframe>';
const EVIL = `Meeting notes ${SCRIPT} ${IMG} ${SVG} ${IFRAME} <b>bold</b>`;

/** No element any hostile string could have produced exists under `root`. */
function expectInert(root: HTMLElement) {
  for (const tag of ["script", "img", "svg", "iframe", "b", "a[href^='javascript']"]) {
    expect(root.querySelector(tag), tag).toBeNull();
  }
  for (const el of Array.from(root.querySelectorAll("*"))) {
    for (const attr of Array.from(el.attributes)) {
      expect(attr.name.startsWith("on"), `${el.tagName} ${attr.name}`).toBe(false);
    }
  }
  expect((window as unknown as Record<string, unknown>).__pwned).toBeUndefined();
}

beforeEach(() => {
  vi.clearAllMocks();
  mocked.listTags.mockResolvedValue([]);
  mocked.listBoxes.mockResolvedValue([]);
});

afterEach(() => {
  delete (window as unknown as Record<string, unknown>).__pwned;
});

describe("hostile note content", () => {
  it("is text in the note detail: content, annotations, links and history", async () => {
    const evilNote = note({
      content: EVIL,
      keywords: [IMG, "plain"],
      tags: [SCRIPT],
      context: IFRAME,
      source: SVG,
      enrich: "failed",
      enrich_error: IMG,
    });
    mocked.getNote.mockResolvedValue({
      note: evilNote,
      links: [
        {
          from: evilNote.id,
          to: "01JNOTE0000000000000000002",
          kind: "relates",
          reason: SCRIPT,
          confidence: 0.8,
          created_by: "llm",
          status: "accepted",
          created_at: "2024-05-01T10:00:00Z",
          other_preview: IMG,
        },
      ],
      history: [
        {
          at: "2024-05-01T10:00:00Z",
          actor: "llm",
          action: "evolution",
          id: "01JREV00000000000000000001",
          status: "applied",
          reason: SVG,
          before: { keywords: ["old"], tags: [], context: "before" },
          after: { keywords: [IMG], tags: [SCRIPT], context: IFRAME },
          changes: [{ op: "add_tag", value: SCRIPT, reason: SVG }],
        },
      ],
      validity: {
        valid_from: "2024-03-01T00:00:00Z",
        valid_until: "2024-09-01T00:00:00Z",
        superseded_by: { id: "01JNOTE0000000000000000003", since: "2024-09-01T00:00:00Z", reason: SCRIPT, preview: IMG },
        replaces: [{ id: "01JNOTE0000000000000000004", reason: SVG, preview: IFRAME }],
      },
    });
    const { container } = renderWith(<NoteDetail id={evilNote.id} />);
    const detail = await screen.findByTestId("note-detail");
    // the content is there, character for character, as text
    await waitFor(() => expect(detail.textContent).toContain(EVIL));
    expect(detail.textContent).toContain(IFRAME);
    expectInert(container);
  });

  it("is text in the notes list", async () => {
    mocked.listNotes.mockResolvedValue({
      total: 2,
      offset: 0,
      notes: [note({ content: EVIL }), note({ id: "01JNOTE0000000000000000002", content: IMG, tags: [SCRIPT] })],
    });
    const { container } = renderWith(<NotesView />);
    await waitFor(() => expect(container.textContent).toContain("Meeting notes <script>"));
    expect(container.textContent).toContain(IMG);
    expectInert(container);
  });
});
