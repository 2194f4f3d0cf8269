import type { NoteDto } from "../../api";

export function EnrichBadge({ note }: { note: NoteDto }) {
  if (note.enrich === "pending")
    return (
      <span className="badge pending" title={note.enrich_error ?? "waiting for the LLM"}>
        pending
      </span>
    );
  if (note.enrich === "failed")
    return (
      <span className="badge failed" title={note.enrich_error ?? ""}>
        failed
      </span>
    );
  return null;
}

export default function NoteItem({
  note,
  selected,
  onOpen,
  extra,
}: {
  note: NoteDto;
  selected: boolean;
  onOpen: () => void;
  extra?: string;
}) {
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
        <span>{new Date(note.created_at).toLocaleString()}</span>
        <EnrichBadge note={note} />
        {extra && <span>{extra}</span>}
      </div>
      <div className="content" style={{ maxHeight: "4.5em", overflow: "hidden" }}>
        {note.content}
      </div>
      <div>
        {note.tags.map((t) => (
          <span className="chip" key={t}>
            #{t}
          </span>
        ))}
      </div>
    </li>
  );
}
