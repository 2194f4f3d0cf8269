import { useRef, useState } from "react";
import { api, errorText, type LinkKindWord, type NoteDto } from "../../api";
import { DEFAULT_LINK_KIND } from "../../states";
import { activeQuery, insertLink, linkLabel, linksInText, type PickedLink } from "../links/wikilink";
import WikiSuggest from "../links/WikiSuggest";
import { useNoteSuggestions } from "../links/useNoteSuggestions";
import LinkKindSelect from "../links/LinkKindSelect";
import { useT } from "../../i18n";

/** Writes a new note; Ctrl+Enter (or Cmd+Enter) saves. `[[` opens a list of notes to link
 * to: the picked ones are linked (as the chosen kind) when the note is saved. */
export default function NoteEditor({ onSaved }: { onSaved: (id: string) => void }) {
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<string | null>(null);
  const [caret, setCaret] = useState(0);
  const [closed, setClosed] = useState<number | null>(null);
  const [active, setActive] = useState(0);
  const [picked, setPicked] = useState<PickedLink[]>([]);
  const [kind, setKind] = useState<LinkKindWord>(DEFAULT_LINK_KIND);
  const input = useRef<HTMLTextAreaElement>(null);
  const { t } = useT();

  const typing = activeQuery(text, caret);
  const open = typing && typing.start !== closed ? typing : null;
  const hits = useNoteSuggestions(open ? open.query : null);
  const links = linksInText(text, picked);

  const pick = (n: NoteDto) => {
    if (!open) return;
    const label = linkLabel(n.content);
    const next = insertLink(text, open.start, caret, label);
    setText(next.text);
    setCaret(next.caret);
    setPicked((p) => [...p, { id: n.id, label }]);
    setActive(0);
    requestAnimationFrame(() => {
      input.current?.focus();
      input.current?.setSelectionRange(next.caret, next.caret);
    });
  };

  const save = async () => {
    if (!text.trim() || busy) return;
    setBusy(true);
    setErr(null);
    try {
      const n = await api.addNote(text);
      const failed: string[] = [];
      for (const l of links) {
        try {
          await api.linkNotes(n.id, l.id, kind, "");
        } catch (e) {
          failed.push(`${l.label}: ${errorText(e)}`);
        }
      }
      setText("");
      setPicked([]);
      setCaret(0);
      onSaved(n.id);
      if (failed.length) setErr(t("editor.someLinksFailed", { failed: failed.join("; ") }));
    } catch (e) {
      setErr(errorText(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="card" style={{ marginBottom: 10, position: "relative" }}>
      <textarea
        ref={input}
        data-testid="note-input"
        rows={3}
        placeholder={t("editor.placeholder")}
        value={text}
        onChange={(e) => {
          setText(e.target.value);
          setCaret(e.target.selectionStart ?? e.target.value.length);
          setActive(0);
        }}
        onSelect={(e) => setCaret(e.currentTarget.selectionStart ?? 0)}
        onKeyDown={(e) => {
          if (open && hits.length > 0) {
            if (e.key === "ArrowDown" || e.key === "ArrowUp") {
              e.preventDefault();
              const d = e.key === "ArrowDown" ? 1 : -1;
              setActive((a) => (a + d + hits.length) % hits.length);
              return;
            }
            if (e.key === "Enter" && !e.ctrlKey && !e.metaKey) {
              e.preventDefault();
              pick(hits[Math.min(active, hits.length - 1)]);
              return;
            }
            if (e.key === "Tab") {
              e.preventDefault();
              pick(hits[Math.min(active, hits.length - 1)]);
              return;
            }
          }
          if (open && e.key === "Escape") {
            e.preventDefault();
            setClosed(open.start);
            return;
          }
          if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
            e.preventDefault();
            void save();
          }
        }}
        aria-label={t("editor.label")}
        aria-autocomplete="list"
      />
      {open && <WikiSuggest hits={hits} active={active} onPick={pick} />}
      <div className="row" style={{ marginTop: 6 }}>
        <span className="small muted grow">
          {links.length > 0
            ? t("editor.linksWhenSaved", { count: links.length })
            : t("editor.hint")}
        </span>
        {links.length > 0 && <LinkKindSelect value={kind} onChange={setKind} testid="wikilink-kind" />}
        <button className="primary" data-testid="note-save" disabled={!text.trim() || busy} onClick={() => void save()}>
          {busy ? t("editor.saving") : t("common.save")}
        </button>
      </div>
      {err && <div className="error small">{err}</div>}
    </div>
  );
}
