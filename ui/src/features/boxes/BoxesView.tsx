import { useQuery } from "@tanstack/react-query";
import { abortable, api, errorText } from "../../api";
import { keys } from "../../queries";
import { useApp } from "../../app-context";
import Empty from "../../components/Empty";
import { PALETTE } from "../graph/graphData";
import { useT } from "../../i18n";

/** Boxes (clusters of linked notes): choosing one focuses the graph on it. */
export default function BoxesView() {
  const { setGraphFocus, go } = useApp();
  const { t } = useT();
  const open = (boxId: string) => {
    setGraphFocus({ center: null, depth: 1, boxId });
    go("graph");
  };
  const q = useQuery({ queryKey: keys.boxes(200), queryFn: ({ signal }) => abortable(api.listBoxes(200), signal) });
  const boxes = q.data ?? null;
  const err = q.error ? errorText(q.error) : null;

  return (
    <div className="view">
      <h2>{t("boxes.title")}</h2>
      {err && <div className="error">{err}</div>}
      {boxes && boxes.length === 0 && (
        <Empty title={t("boxes.emptyTitle")}>
          {t("boxes.emptyBody")}
        </Empty>
      )}
      <ul className="list" data-testid="box-list">
        {boxes?.map((b, i) => (
          <li
            key={b.id}
            className="card"
            data-testid="box-item"
            data-id={b.id}
            tabIndex={0}
            role="button"
            aria-label={t("boxes.itemLabel", { label: b.label, count: b.size })}
            onClick={() => open(b.id)}
            onKeyDown={(e) => {
              if (e.key === "Enter" || e.key === " ") {
                e.preventDefault();
                open(b.id);
              }
            }}
          >
            <span className="dot" style={{ background: PALETTE[i % PALETTE.length] }} />
            <strong translate="no">{b.label}</strong> <span className="muted">{t("boxes.size", { count: b.size })}</span>
          </li>
        ))}
      </ul>
    </div>
  );
}
