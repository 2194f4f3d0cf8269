import { useEffect, useState } from "react";
import { api, errorText, type BoxDto } from "../../api";
import { useApp } from "../../app-context";
import Empty from "../../components/Empty";
import { PALETTE } from "../graph/graphData";

/** Boxes (clusters of linked notes): choosing one focuses the graph on it. */
export default function BoxesView() {
  const { setGraphFocus, go, revision } = useApp();
  const open = (boxId: string) => {
    setGraphFocus({ center: null, depth: 1, boxId });
    go("graph");
  };
  const [boxes, setBoxes] = useState<BoxDto[] | null>(null);
  const [err, setErr] = useState<string | null>(null);

  useEffect(() => {
    api
      .listBoxes(200)
      .then((b) => {
        setBoxes(b);
        setErr(null);
      })
      .catch((e) => setErr(errorText(e)));
  }, [revision]);

  return (
    <div className="view">
      <h2>Boxes</h2>
      {err && <div className="error">{err}</div>}
      {boxes && boxes.length === 0 && (
        <Empty title="No Boxes yet.">
          A Box is a group of notes whose links and contexts hang together — a person, a project, a topic. Boxes form
          on their own as the LLM links your notes; add a few notes about the same subject and they will appear here.
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
            aria-label={`${b.label}, ${b.size} notes: show in the graph`}
            onClick={() => open(b.id)}
            onKeyDown={(e) => {
              if (e.key === "Enter" || e.key === " ") {
                e.preventDefault();
                open(b.id);
              }
            }}
          >
            <span className="dot" style={{ background: PALETTE[i % PALETTE.length] }} />
            <strong>{b.label}</strong> <span className="muted">· {b.size} notes</span>
          </li>
        ))}
      </ul>
    </div>
  );
}
