import type { ReactNode } from "react";
import type { NoteDto } from "../../api";
import { useT } from "../../i18n";

export function EnrichBadge({ note }: { note: NoteDto }) {
  const { t } = useT();
  if (note.enrich === "pending")
    return (
      <span className="badge pending" title={note.enrich_error ?? t("notes.pendingTitle")}>
        {t("notes.pending")}
      </span>
    );
  if (note.enrich === "failed")
    return (
      <span className="badge failed" title={note.enrich_error ?? ""}>
        {t("notes.failed")}
      </span>
    );
  return null;
}

export default function NoteItem({
  note,
  selected,
  onOpen,
  extra,
  children,
}: {
  note: NoteDto;
  selected: boolean;
  onOpen: () => void;
  extra?: string;
  /** More about the note, below its tags (e.g. what replaced it). */
  children?: ReactNode;
}) {
  const { date } = useT();
  return (
    <li
      className={`card ${selected ? "selected" : ""}`}
      data-testid="note-item"
      data-id={note.id}
      data-enrich={note.enrich}
      onClick={onOpen}
      onKeyDown={(e) => e.key === "Enter" && onOpen()}
      tabIndex={0}
    >
      <div className="row small muted">
        <span>{date(note.created_at)}</span>
        <EnrichBadge note={note} />
        {extra && <span>{extra}</span>}
      </div>
      <div className="content" translate="no" style={{ maxHeight: "4.5em", overflow: "hidden" }}>
        {note.content}
      </div>
      <div translate="no">
        {note.tags.map((t) => (
          <span className="chip" key={t}>
            #{t}
          </span>
        ))}
      </div>
      {children}
    </li>
  );
}
