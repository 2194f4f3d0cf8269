import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { note, renderWith } from "./util";

vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return {
    ...real,
    api: {
      noteLifecycle: vi.fn(),
      fadingNotes: vi.fn(),
      archivedNotes: vi.fn(),
      archiveNote: vi.fn(),
      restoreNote: vi.fn(),
      keepNote: vi.fn(),
      setNoteTier: vi.fn(),
      listProjects: vi.fn(),
      setProjectOpen: vi.fn(),
    },
  };
});

import { api } from "../api";
import FadingView from "../features/fading/FadingView";
import NoteLifecycle, { Strength } from "../features/fading/StrengthBar";

const mocked = api as unknown as Record<string, ReturnType<typeof vi.fn>>;

beforeEach(() => {
  vi.clearAllMocks();
  mocked.listProjects.mockResolvedValue([]);
});

describe("Strength", () => {
  it("fills the bar to the strength and says fading below the threshold", () => {
    renderWith(
      <>
        <Strength strength={0.8} threshold={0.2} testid="a" />
        <Strength strength={0.15} threshold={0.2} testid="b" />
      </>,
    );
    const a = screen.getByTestId("a");
    expect(a.getAttribute("data-fading")).toBe("false");
    expect((a.querySelector(".strength-bar > span") as HTMLElement).style.width).toBe("80%");
    expect(a.textContent).toBe("80%");
    const b = screen.getByTestId("b");
    expect(b.getAttribute("data-fading")).toBe("true");
    expect(b.textContent).toBe("fading");
  });
});

describe("NoteLifecycle", () => {
  it("shows strength and tier; a fading note can be kept or archived, an archived one restored", async () => {
    mocked.noteLifecycle.mockResolvedValue({ strength: 0.1, tier: "short_term", project: null, threshold: 0.2, fading: true, archived: false });
    mocked.keepNote.mockResolvedValue(0.6);
    const { invalidated } = renderWith(<NoteLifecycle id="n1" />);
    expect((await screen.findByTestId("note-strength")).getAttribute("data-fading")).toBe("true");
    expect(screen.getByTestId("note-tier").textContent).toBe("short-term");
    expect(screen.queryByTestId("note-restore")).toBeNull();
    await userEvent.click(screen.getByTestId("note-keep"));
    expect(mocked.keepNote).toHaveBeenCalledWith("n1");
    // kept: the note's lifecycle and the Fading lists are read again
    await waitFor(() => expect(invalidated()).toEqual(expect.arrayContaining([["lifecycle"], ["fading"], ["archived"], ["projects"], ["notes"]])));
    expect(invalidated()).not.toContainEqual(["review"]);
  });

  it("offers restore for an archived note", async () => {
    mocked.noteLifecycle.mockResolvedValue({ strength: 0.1, tier: "project", project: "thesis", threshold: 0.2, fading: false, archived: true });
    mocked.restoreNote.mockResolvedValue(note());
    renderWith(<NoteLifecycle id="n2" />);
    await userEvent.click(await screen.findByTestId("note-restore"));
    expect(mocked.restoreNote).toHaveBeenCalledWith("n2");
    expect(screen.getByTestId("note-tier").textContent).toBe("project: thesis");
    expect(screen.queryByTestId("note-keep")).toBeNull();
  });
});

describe("tier and projects", () => {
  it("sets a tier, and a project tier with its name", async () => {
    mocked.noteLifecycle.mockResolvedValue({ strength: 0.9, tier: "long_term", project: null, threshold: 0.2, fading: false, archived: false });
    mocked.setNoteTier.mockResolvedValue({});
    renderWith(<NoteLifecycle id="n3" />);
    const select = (await screen.findByTestId("note-tier-select")) as HTMLSelectElement;
    expect(select.value).toBe("long_term");
    await userEvent.selectOptions(select, "short_term");
    expect(mocked.setNoteTier).toHaveBeenCalledWith("n3", "short_term", null);
    await userEvent.selectOptions(select, "project");
    expect(mocked.setNoteTier).toHaveBeenCalledTimes(1);
    const save = screen.getByTestId("note-project-save") as HTMLButtonElement;
    expect(save.disabled).toBe(true);
    await userEvent.type(screen.getByTestId("note-project"), " thesis ");
    await userEvent.click(save);
    expect(mocked.setNoteTier).toHaveBeenLastCalledWith("n3", "project", "thesis");
  });

  it("opens and closes projects in the Fading view", async () => {
    mocked.fadingNotes.mockResolvedValue({ threshold: 0.2, notes: [] });
    mocked.archivedNotes.mockResolvedValue({ total: 0, offset: 0, notes: [] });
    mocked.listProjects.mockResolvedValue([
      { name: "thesis", active: true },
      { name: "move", active: false },
    ]);
    mocked.setProjectOpen.mockResolvedValue(null);
    renderWith(<FadingView />);
    const items = await screen.findAllByTestId("project-item");
    expect(items.map((i) => i.getAttribute("data-open"))).toEqual(["true", "false"]);
    await userEvent.click(screen.getByTestId("project-toggle-0"));
    expect(mocked.setProjectOpen).toHaveBeenCalledWith("thesis", false);
    await userEvent.click(screen.getByTestId("project-toggle-1"));
    expect(mocked.setProjectOpen).toHaveBeenCalledWith("move", true);
  });
});

describe("FadingView", () => {
  it("lists the fading notes weakest first with archive/keep, and the archived with restore", async () => {
    mocked.fadingNotes.mockResolvedValue({
      threshold: 0.2,
      notes: [
        { id: "f1", preview: "today's plan", strength: 0.05, tier: "short-term", project: null, idle_days: 3.2 },
        { id: "f2", preview: "an old idea", strength: 0.15, tier: "long-term", project: null, idle_days: 400 },
      ],
    });
    mocked.archivedNotes.mockResolvedValue({ total: 1, offset: 0, notes: [note({ id: "a1", content: "archived thought", status: "archived" })] });
    mocked.archiveNote.mockResolvedValue(note());
    mocked.keepNote.mockResolvedValue(0.7);
    mocked.restoreNote.mockResolvedValue(note());
    const { invalidated } = renderWith(<FadingView />);
    await screen.findByTestId("fading-view");
    const items = screen.getAllByTestId("fading-item");
    expect(items.map((i) => i.getAttribute("data-id"))).toEqual(["f1", "f2"]);
    expect(screen.getByTestId("fading-strength-0").getAttribute("data-fading")).toBe("true");
    await userEvent.click(screen.getByTestId("fading-archive-0"));
    expect(mocked.archiveNote).toHaveBeenCalledWith("f1");
    await userEvent.click(screen.getByTestId("fading-keep-1"));
    expect(mocked.keepNote).toHaveBeenCalledWith("f2");
    expect(screen.getByTestId("archived-item").textContent).toContain("archived thought");
    await userEvent.click(screen.getByTestId("archived-restore-0"));
    expect(mocked.restoreNote).toHaveBeenCalledWith("a1");
    await waitFor(() => expect(invalidated().filter((k) => JSON.stringify(k) === '["fading"]')).toHaveLength(3));
  });

  it("cuts a long preview between characters, never inside an emoji", async () => {
    mocked.fadingNotes.mockResolvedValue({ threshold: 0.2, notes: [] });
    // an odd start puts a cut by UTF-16 units in the middle of an emoji's surrogate pair
    const content = `a${"😀".repeat(200)}`;
    mocked.archivedNotes.mockResolvedValue({ total: 1, offset: 0, notes: [note({ id: "a1", content, status: "archived" })] });
    renderWith(<FadingView />);
    const text = (await screen.findByTestId("archived-item")).querySelector(".content")?.textContent ?? "";
    expect(text.endsWith("…")).toBe(true);
    // no half of a surrogate pair left alone
    expect(text).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/);
    expect(Array.from(text)).toHaveLength(121);
  });

  it("says when nothing is fading", async () => {
    mocked.fadingNotes.mockResolvedValue({ threshold: 0.2, notes: [] });
    mocked.archivedNotes.mockResolvedValue({ total: 0, offset: 0, notes: [] });
    renderWith(<FadingView />);
    expect(await screen.findByTestId("fading-empty")).toBeTruthy();
  });
});
