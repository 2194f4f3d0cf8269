import { act, cleanup, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { HistoryDto, LinkDto, ReviewItemDto } from "../api";
import { note, renderWith } from "./util";

// sigma (WebGL) and the layout worker, which jsdom lacks
vi.mock("sigma", async () => ({ default: (await import("./fakeSigma")).FakeSigma }));
vi.mock("sigma/rendering", () => ({ EdgeLineProgram: class {} }));
vi.mock("graphology-layout-forceatlas2/worker", async () => ({
  default: (await import("./fakeSigma")).FakeLayout,
}));

vi.mock("../api", async (orig) => {
  const real = await orig<typeof import("../api")>();
  return {
    ...real,
    api: new Proxy({} as Record<string, ReturnType<typeof vi.fn>>, {
      get: (o, k: string) => (o[k] ??= vi.fn().mockResolvedValue(null)),
    }),
    onJob: () => Promise.resolve(() => {}),
    onStatus: () => Promise.resolve(() => {}),
  };
});

const { api } = await import("../api");
const i18n = await import("../i18n");
const { en } = await import("../i18n/en");
const { zh } = await import("../i18n/zh");
const { default: App } = await import("../App");
const { default: SettingsView } = await import("../features/settings/SettingsView");
const { aggregate, UNBOXED } = await import("../features/graph/boxGraph");

const mocked = api as unknown as Record<string, ReturnType<typeof vi.fn>>;

// user data written in Chinese, as a Chinese-speaking user would have it
const zhNote = note({ id: "N1", source: "import:sample-notebook", content: "卡片盒笔记法：每张卡片只写一个想法。", tags: ["笔记"], keywords: ["卡片"], context: "关于做笔记的方法" });
const linkDto: LinkDto = {
  from: "N1",
  to: "N2",
  kind: "supports",
  reason: "两条笔记都讲原子笔记",
  confidence: 0.8,
  created_by: "llm",
  status: "accepted",
  created_at: "2024-05-01T10:00:00Z",
  other_preview: "原子笔记便于链接",
};
const history: HistoryDto[] = [
  { at: "2024-05-01T10:00:00Z", actor: "user", action: "created", id: null, status: null, reason: "", before: null, after: null, changes: [], content_before: null, content_after: null },
  {
    at: "2024-05-01T10:01:00Z",
    actor: "llm",
    action: "construction",
    id: "R1",
    status: "applied",
    reason: "构建",
    before: { keywords: [], tags: [], context: "" },
    after: { keywords: ["卡片"], tags: ["笔记"], context: "关于做笔记的方法" },
    changes: [{ op: "add_tag", value: "笔记", reason: "" }],
    content_before: null,
    content_after: null,
  },
];
const reviewItem: ReviewItemDto = {
  kind: "link",
  id: "L1",
  note: "N1",
  note_preview: "卡片盒笔记法",
  target: "N2",
  target_preview: "原子笔记",
  event: "E1",
  label: "supports",
  reason: "都讲原子笔记",
  confidence: 0.8,
  before: null,
  after: null,
  status: "applied",
  created_at: "2024-05-01T10:00:00Z",
  changes: [],
  by: "llm",
  note_valid_from: null,
  target_valid_from: null,
};
const status = {
  memory: "ready",
  memory_message: "",
  notes: 2,
  llm_configured: true,
  llm_label: "fake-model",
  llm_ok: true,
  llm_message: "",
  jobs_queued: 0,
  jobs_running: 0,
  jobs_failed: 1,
  jobs_done: 3,
  enriching: false,
  opened_ms: 1200,
  clients: 1,
};

function mockMemory() {
  mocked.appStatus.mockResolvedValue(status);
  mocked.listNotes.mockResolvedValue({ notes: [zhNote], total: 1 });
  mocked.listTags.mockResolvedValue([{ tag: "笔记", n: 1 }]);
  mocked.listBoxes.mockResolvedValue([{ id: "B1", label: "卡片盒", size: 2 }]);
  mocked.getNote.mockResolvedValue({
    note: zhNote,
    links: [linkDto],
    history,
    validity: {
      valid_from: "2024-03-01T00:00:00Z",
      valid_until: "2024-09-01T00:00:00Z",
      superseded_by: { id: "N3", since: "2024-09-01T00:00:00Z", reason: "房租: 1,200 → 1,300", preview: "从九月起房租是 1,300 欧元" },
      replaces: [{ id: "N0", reason: "房租: 1,100 → 1,200", preview: "房租是 1,100 欧元" }],
    },
  });
  mocked.noteLifecycle.mockResolvedValue({ strength: 0.1, tier: "short_term", project: null, threshold: 0.2, fading: true, archived: false });
  mocked.linkKinds.mockResolvedValue(["relates", "supports"]);
  mocked.graphNodes.mockResolvedValue({ nodes: [{ id: "N1", label: "卡片", tags: ["笔记"], enrich: "done", boxes: ["B1"], strength: 1 }], links: [], next: null });
  mocked.graphLinks.mockResolvedValue({ nodes: [], links: [], next: null });
  mocked.reviewQueue.mockResolvedValue({ items: [reviewItem], more: true, agents: ["agent:planner"] });
  mocked.listEvents.mockResolvedValue([]);
  mocked.insights.mockResolvedValue({
    notes_per_day: [{ day: "2024-05-01", n: 2, tokens: 0 }],
    links_per_day: [],
    tokens_per_day: [{ day: "2024-05-01", n: 0, tokens: 1234 }],
    top_tags: [{ tag: "笔记", n: 2 }],
    boxes: [{ id: "B1", label: "卡片盒", size: 2 }],
    total_notes: 2,
  });
  mocked.getSettings.mockResolvedValue({
    provider: "openai",
    base_url: "http://127.0.0.1:8080/v1",
    model: "fake-model",
    timeout_secs: 60,
    api_key_storage: "keyring",
    k: 5,
    links_policy: "auto",
    edits_policy: "auto",
    auto_accept_confidence: null,
    env_overrides: [],
  });
  mocked.llmOverview.mockResolvedValue({
    in_use: { label: "fake-model", source: "settings", ready: true, problem: null, steps: "construction, links and evolution", model_path: null },
    discovered: [],
    env_chooses: false,
  });
  mocked.fadingNotes.mockResolvedValue({ threshold: 0.2, notes: [{ id: "N1", preview: "卡片盒笔记法", strength: 0.1, tier: "short_term", project: null, idle_days: 3 }] });
  mocked.archivedNotes.mockResolvedValue({ total: 1, notes: [note({ id: "N3", content: "旧的笔记" })] });
  mocked.listProjects.mockResolvedValue([{ name: "论文", active: true }]);
}

beforeEach(() => {
  vi.clearAllMocks();
  window.localStorage.clear();
  i18n.setLangChoice("system");
  mockMemory();
});
afterEach(() => i18n.setLangChoice("system"));

describe("the dictionaries", () => {
  it("have the same keys, and each plural has both forms", () => {
    expect(Object.keys(zh).sort()).toEqual(Object.keys(en).sort());
    for (const [k, v] of Object.entries(zh)) {
      const e = (en as Record<string, unknown>)[k];
      expect(typeof v, k).toBe(typeof e);
      expect(v, k).not.toBe("");
    }
  });

  it("interpolate, pick plurals and format numbers by language", () => {
    expect(i18n.translate("en", "status.notes", { count: 1 })).toBe("1 note");
    expect(i18n.translate("en", "status.notes", { count: 1234 })).toBe("1,234 notes");
    expect(i18n.translate("zh", "status.notes", { count: 3 })).toBe("3 条笔记");
    expect(i18n.translate("zh", "import.result", { created: 1, existing: 2, links: 3 })).toBe("1 条新笔记，2 条已存在，3 条新链接");
    expect(i18n.formatDateTime("zh", "2024-05-01T10:00:00Z")).toMatch(/2024年5月1日/);
    expect(i18n.formatDateTime("en", "2024-05-01T10:00:00Z")).toMatch(/May 1, 2024/);
  });

  it("follow the system's language, English when it is neither", () => {
    expect(i18n.systemLang(["zh-CN", "en-US"])).toBe("zh");
    expect(i18n.systemLang(["zh-Hant-TW"])).toBe("zh");
    expect(i18n.systemLang(["fr-FR", "en-GB"])).toBe("en");
    expect(i18n.systemLang(["de-DE"])).toBe("en");
    // the test environment (jsdom) says en-US: the UI is English under the test harness
    expect(navigator.language).toBe("en-US");
    expect(i18n.getLang()).toBe("en");
  });

  it("find an English UI string left in a text, and not a word of user data", () => {
    expect(i18n.englishLeft("卡片盒 · Roll back this change")).toContain("Roll back this change");
    expect(i18n.englishLeft("设置\n笔记")).toEqual([]);
    // "Loading" inside another word is not the UI string
    expect(i18n.englishLeft("Downloadings")).toEqual([]);
  });
});

describe("the graph's canvas labels", () => {
  it("name the aggregate of notes in no Box in the UI's language", () => {
    const data = { nodes: [{ id: "N1", label: "卡片", tags: [], enrich: "done" as const, boxes: [], strength: 1 }], links: [], truncated: false };
    expect(aggregate(data, []).nodes.find((n) => n.id === UNBOXED)?.label).toBe("no Box");
    i18n.setLangChoice("zh");
    expect(aggregate(data, []).nodes.find((n) => n.id === UNBOXED)?.label).toBe("无卡片盒");
  });
});

describe("switching the language in Settings", () => {
  it("changes the visible strings at once, keeps the choice, and goes back", async () => {
    renderWith(<SettingsView />);
    const select = (await screen.findByTestId("settings-language")) as HTMLSelectElement;
    expect(screen.getByRole("heading", { name: "Settings" })).toBeTruthy();
    expect(screen.getByText("Test connection")).toBeTruthy();

    await userEvent.selectOptions(select, "zh");
    expect(screen.getByRole("heading", { name: "设置" })).toBeTruthy();
    expect(screen.getByText("测试连接")).toBeTruthy();
    expect(screen.queryByText("Test connection")).toBeNull();
    expect(window.localStorage.getItem(i18n.STORAGE_KEY)).toBe("zh");
    expect(document.documentElement.lang).toBe("zh-CN");

    await userEvent.selectOptions(select, "system");
    expect(screen.getByRole("heading", { name: "Settings" })).toBeTruthy();
    expect(window.localStorage.getItem(i18n.STORAGE_KEY)).toBeNull();
    expect(document.documentElement.lang).toBe("en");
  });
});

describe("a message on the screen", () => {
  it("goes when the language changes (it was written in the one just left)", async () => {
    mocked.reviewRollback.mockResolvedValue(undefined as never);
    renderWith(<App />);
    await userEvent.click(await screen.findByTestId("note-item"));
    await userEvent.click(await screen.findByTestId("rollback"));
    expect((await screen.findByTestId("toast")).textContent).toMatch(/[A-Za-z]/);
    act(() => i18n.setLangChoice("zh"));
    await waitFor(() => expect(screen.queryByTestId("toast")).toBeNull());
  });
});

/** The UI text of the whole app after visiting every view from the navigation. */
async function walkViews(): Promise<Record<string, string>> {
  const { container } = renderWith(<App />);
  const seen: Record<string, string> = {};
  const views = ["notes", "graph", "boxes", "review", "chat", "insights", "settings", "fading"];
  for (const v of views) {
    await userEvent.click(screen.getByTestId(`nav-${v}`));
    await act(async () => {
      await new Promise((r) => setTimeout(r, 30));
    });
    if (v === "notes") {
      await userEvent.click(await screen.findByTestId("note-item"));
      await screen.findByTestId("note-lifecycle");
      await screen.findByTestId("link-list");
    }
    if (v === "graph") await screen.findByTestId("graph-view");
    if (v === "review") await screen.findByTestId("review-item");
    if (v === "insights") await screen.findByTestId("insights");
    if (v === "settings") await screen.findByTestId("llm-in-use");
    if (v === "fading") await screen.findByTestId("archived-item");
    await waitFor(() => expect(screen.getByTestId("status-bar").getAttribute("data-memory")).toBe("ready"));
    seen[v] = i18n.uiText(container);
  }
  return seen;
}

describe("the main views in Chinese", () => {
  it("show no string of the English dictionary (and the check finds them in English)", async () => {
    const english = await walkViews();
    // the same walk in English shows English UI strings on every view: the check can fail
    for (const [v, text] of Object.entries(english)) expect(i18n.englishLeft(text).length, v).toBeGreaterThan(3);

    cleanup();
    i18n.setLangChoice("zh");
    const chinese = await walkViews();
    for (const [v, text] of Object.entries(chinese)) {
      expect(i18n.englishLeft(text), `${v}:\n${text}`).toEqual([]);
      expect(text, v).toMatch(/[\u4e00-\u9fff]/);
    }
    // user data stays as written
    expect(chinese.notes).not.toContain("卡片盒笔记法：每张卡片只写一个想法。");
  });
});
