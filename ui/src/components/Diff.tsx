import type { FieldsDto } from "../api";
import { useT, type Key } from "../i18n";

const join = (v: string[]) => v.join(", ");

/** Field-by-field before/after of an edit; unchanged fields are left out. */
export default function Diff({ before, after }: { before: FieldsDto | null; after: FieldsDto | null }) {
  const { t } = useT();
  if (!before && !after) return null;
  const b = before ?? { keywords: [], tags: [], context: "" };
  const a = after ?? { keywords: [], tags: [], context: "" };
  const rows: [Key, string, string][] = [
    ["detail.keywords", join(b.keywords), join(a.keywords)],
    ["detail.tags", join(b.tags), join(a.tags)],
    ["detail.context", b.context, a.context],
  ];
  const changed = rows.filter(([, x, y]) => x !== y);
  if (changed.length === 0) return <div className="small muted">{t("diff.noChange")}</div>;
  return (
    <div className="diff" data-testid="diff">
      {changed.map(([f, x, y]) => (
        <div key={f} style={{ display: "contents" }}>
          <span className="muted">{t(f)}</span>
          <span className="del" translate="no">{x || "—"}</span>
          <span className="add" translate="no">{y || "—"}</span>
        </div>
      ))}
    </div>
  );
}
