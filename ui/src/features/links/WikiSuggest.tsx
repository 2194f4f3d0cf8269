import type { NoteDto } from "../../api";
import { useT } from "../../i18n";
import { preview } from "../../preview";

/** The list of notes to pick from; `active` is the highlighted one. */
export default function WikiSuggest({
  hits,
  active,
  onPick,
  testid = "wikilink-suggest",
  optionTestid = "wikilink-option",
}: {
  hits: NoteDto[];
  active: number;
  onPick: (n: NoteDto) => void;
  testid?: string;
  optionTestid?: string;
}) {
  const { t } = useT();
  return (
    <ul className="list suggest" role="listbox" data-testid={testid}>
      {hits.length === 0 && <li className="small muted">{t("link.noMatch")}</li>}
      {hits.map((n, i) => (
        <li
          key={n.id}
          role="option"
          aria-selected={i === active}
          className={`small${i === active ? " active" : ""}`}
          data-testid={`${optionTestid}-${i}`}
          data-id={n.id}
          // mousedown, not click: the textarea keeps its focus and caret
          onMouseDown={(e) => {
            e.preventDefault();
            onPick(n);
          }}
        >
          <span className="content" translate="no">
            {preview(n.content, 100)}</span>
        </li>
      ))}
    </ul>
  );
}
