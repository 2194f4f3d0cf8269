import { useCallback, useEffect, useMemo, useState } from "react";
import { Ctx, type AppCtx, type GraphFocus, type View } from "./app-context";
import { useChanged, useJobChanges } from "./queries";
import StatusBar from "./components/StatusBar";
import Opening from "./components/Opening";
import { memoryOpening, useStatusFeed } from "./components/useStatusFeed";
import NotesView from "./features/notes/NotesView";
import GraphView from "./features/graph/GraphView";
import BoxesView from "./features/boxes/BoxesView";
import ReviewView from "./features/review/ReviewView";
import ChatView from "./features/chat/ChatView";
import SettingsView from "./features/settings/SettingsView";
import InsightsView from "./features/insights/InsightsView";
import FadingView from "./features/fading/FadingView";
import { useT, type Key } from "./i18n";

const VIEWS: { id: View; label: Key; key: string }[] = [
  { id: "notes", label: "nav.notes", key: "1" },
  { id: "graph", label: "nav.graph", key: "2" },
  { id: "boxes", label: "nav.boxes", key: "3" },
  { id: "review", label: "nav.review", key: "4" },
  { id: "chat", label: "nav.chat", key: "5" },
  { id: "insights", label: "nav.insights", key: "6" },
  { id: "settings", label: "nav.settings", key: "7" },
  { id: "fading", label: "nav.fading", key: "8" },
];

export default function App() {
  const { t, lang } = useT();
  const [view, setView] = useState<View>("notes");
  const [selected, setSelected] = useState<string | null>(null);
  const [highlight, setHighlight] = useState<string[]>([]);
  const [graphFocus, setGraphFocus] = useState<GraphFocus>({ center: null, depth: 1, boxId: null });
  const [toastMsg, setToastMsg] = useState<string | null>(null);
  const [asOf, setAsOf] = useState<string | null>(null);

  const changed = useChanged();
  const { status, statusError } = useStatusFeed(changed);
  const opening = memoryOpening(status, statusError);
  // Settings holds the restore, which reopens the memory under it: it waits only for the
  // first open, and stays while a restore runs
  const [firstOpen, setFirstOpen] = useState(true);
  useEffect(() => {
    if (!opening) setFirstOpen(false);
  }, [opening]);
  const toast = useCallback((m: string) => {
    setToastMsg(m);
    window.setTimeout(() => setToastMsg((cur) => (cur === m ? null : cur)), 5000);
  }, []);
  // a message written in the language just left is not left on the screen
  useEffect(() => setToastMsg(null), [lang]);
  const openNote = useCallback((id: string) => {
    setSelected(id);
    setView("notes");
  }, []);

  // a finished job makes stale what it changed
  useJobChanges();

  // Alt+1..8 switch views.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (!e.altKey) return;
      const v = VIEWS.find((x) => x.key === e.key);
      if (v) {
        e.preventDefault();
        setView(v.id);
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);

  const ctx: AppCtx = useMemo(
    () => ({
      view,
      go: setView,
      openNote,
      selected,
      highlight,
      setHighlight,
      graphFocus,
      setGraphFocus,
      toast,
      status,
      statusError,
      asOf,
      setAsOf,
    }),
    [view, openNote, selected, highlight, graphFocus, toast, status, statusError, asOf],
  );

  return (
    <Ctx.Provider value={ctx}>
      <div className="app">
        <nav className="nav" aria-label={t("nav.label")}>
          <div className="brand">
            <img src="/icon.png" width={22} height={22} alt="" /> Kasten
          </div>
          {VIEWS.map((v) => (
            <button
              key={v.id}
              className={view === v.id ? "active" : ""}
              onClick={() => setView(v.id)}
              data-testid={`nav-${v.id}`}
              aria-current={view === v.id ? "page" : undefined}
            >
              {t(v.label)} <kbd>Alt+{v.key}</kbd>
            </button>
          ))}
        </nav>
        <main className="main">
          {/* the Notes view waits in its list (its editor works at once: a save waits for the
              open); the views that only read the memory wait as a whole */}
          {view === "notes" && <NotesView />}
          {view === "graph" && (opening ? <Waiting /> : <GraphView />)}
          {view === "boxes" && (opening ? <Waiting /> : <BoxesView />)}
          {view === "review" && (opening ? <Waiting /> : <ReviewView />)}
          {/* the conversation survives switching views (a citation opens the Notes view) */}
          <div style={{ display: view === "chat" ? "contents" : "none" }}>
            <ChatView />
          </div>
          {view === "insights" && (opening ? <Waiting /> : <InsightsView />)}
          {view === "settings" && (opening && firstOpen ? <Waiting /> : <SettingsView />)}
          {view === "fading" && (opening ? <Waiting /> : <FadingView />)}
        </main>
        <StatusBar />
      </div>
      {toastMsg && (
        <div className="toast" role="status" data-testid="toast">
          {toastMsg}{" "}
          <button className="small toast-close" aria-label={t("toast.dismiss")} onClick={() => setToastMsg(null)}>
            ×
          </button>
        </div>
      )}
    </Ctx.Provider>
  );
}

/** A view that waits for the memory to open. */
function Waiting() {
  return (
    <div className="view">
      <Opening />
    </div>
  );
}
