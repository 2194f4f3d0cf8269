import { useState } from "react";
import { api, errorText } from "../../api";

/** Writes a new note; Ctrl+Enter (or Cmd+Enter) saves. */
export default function NoteEditor({ onSaved }: { onSaved: (id: string) => void }) {
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<string | null>(null);

  const save = async () => {
    if (!text.trim() || busy) return;
    setBusy(true);
    setErr(null);
    try {
      const n = await api.addNote(text);
      setText("");
      onSaved(n.id);
    } catch (e) {
      setErr(errorText(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="card" style={{ marginBottom: 10 }}>
      <textarea
        data-testid="note-input"
        rows={3}
        placeholder="Write a note: a fact, a decision, something someone said… (Ctrl+Enter saves)"
        value={text}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
            e.preventDefault();
            void save();
          }
        }}
        aria-label="New note"
      />
      <div className="row" style={{ marginTop: 6 }}>
        <span className="small muted grow">Saved at once; the LLM then adds keywords, tags, context and links.</span>
        <button className="primary" data-testid="note-save" disabled={!text.trim() || busy} onClick={() => void save()}>
          {busy ? "Saving…" : "Save"}
        </button>
      </div>
      {err && <div className="error small">{err}</div>}
    </div>
  );
}
