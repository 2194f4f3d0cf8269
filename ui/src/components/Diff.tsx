import type { FieldsDto } from "../api";

const join = (v: string[]) => v.join(", ");

/** Field-by-field before/after of an edit; unchanged fields are left out. */
export default function Diff({ before, after }: { before: FieldsDto | null; after: FieldsDto | null }) {
  if (!before && !after) return null;
  const b = before ?? { keywords: [], tags: [], context: "" };
  const a = after ?? { keywords: [], tags: [], context: "" };
  const rows: [string, string, string][] = [
    ["keywords", join(b.keywords), join(a.keywords)],
    ["tags", join(b.tags), join(a.tags)],
    ["context", b.context, a.context],
  ];
  const changed = rows.filter(([, x, y]) => x !== y);
  if (changed.length === 0) return <div className="small muted">no field changed</div>;
  return (
    <div className="diff" data-testid="diff">
      {changed.map(([f, x, y]) => (
        <div key={f} style={{ display: "contents" }}>
          <span className="muted">{f}</span>
          <span className="del">{x || "—"}</span>
          <span className="add">{y || "—"}</span>
        </div>
      ))}
    </div>
  );
}
