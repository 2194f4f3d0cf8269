import { useState } from "react";
import { api, errorText, type LinkKindWord, type NoteDto } from "../../api";
import { DEFAULT_LINK_KIND } from "../../states";
import LinkKindSelect from "./LinkKindSelect";
import WikiSuggest from "./WikiSuggest";
import { useNoteSuggestions } from "./useNoteSuggestions";
import { useT } from "../../i18n";
import { preview } from "../../preview";

/** Adds a link from `noteId` by hand: search a note, pick a kind, an optional reason. */
export default function LinkEditor({ noteId, onLinked }: { noteId: string; onLinked: (to: string) => void }) {
  const [open, setOpen] = useState(false);
  const [query, setQuery] = useState("");
  const [target, setTarget] = useState<NoteDto | null>(null);
  const [kind, setKind] = useState<LinkKindWord>(DEFAULT_LINK_KIND);
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<string | null>(null);
  const hits = useNoteSuggestions(open && !target ? query : null, noteId);
  const { t } = useT();

  const reset = () => {
    setOpen(false);
    setQuery("");
    setTarget(null);
    setKind(DEFAULT_LINK_KIND);
    setReason("");
    setErr(null);
  };

  if (!open)
    return (
      <button className="small" data-testid="link-add" onClick={() => setOpen(true)}>
        {t("link.add")}
      </button>
    );

  const save = async () => {
    if (!target || busy) return;
    setBusy(true);
    setErr(null);
    try {
      await api.linkNotes(noteId, target.id, kind, reason.trim());
      reset();
      onLinked(target.id);
    } catch (e) {
      setErr(errorText(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="card" data-testid="link-editor">
      {target ? (
        <div className="row small">
          <span className="grow content" data-testid="link-target" translate="no">
            → {preview(target.content, 100)}
          </span>
          <button className="small" onClick={() => setTarget(null)}>
            {t("link.change")}
          </button>
        </div>
      ) : (
        <>
          <input
            autoFocus
            data-testid="link-search"
            aria-label={t("link.find")}
            placeholder={t("link.findPlaceholder")}
            value={query}
            onChange={(e) => setQuery(e.target.value)}
          />
          <WikiSuggest hits={hits} active={-1} onPick={setTarget} testid="link-candidates" optionTestid="link-candidate" />
        </>
      )}
      <div className="row" style={{ marginTop: 6 }}>
        <LinkKindSelect value={kind} onChange={setKind} />
        <input
          className="grow"
          data-testid="link-reason"
          aria-label={t("link.why")}
          placeholder={t("link.why")}
          value={reason}
          onChange={(e) => setReason(e.target.value)}
        />
        <button className="primary" data-testid="link-confirm" disabled={!target || busy} onClick={() => void save()}>
          {t("link.link")}
        </button>
        <button onClick={reset}>{t("common.cancel")}</button>
      </div>
      {err && <div className="error small">{err}</div>}
    </div>
  );
}
