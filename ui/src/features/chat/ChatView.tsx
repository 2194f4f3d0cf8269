import { Fragment, useEffect, useRef, useState } from "react";
import { api, errorText, type AnswerDto, type ChatTurnDto } from "../../api";
import { useApp } from "../../app-context";
import Empty from "../../components/Empty";
import { getLang, translate, useT } from "../../i18n";
import AsOf, { useDay } from "../../components/AsOf";

interface Turn {
  question: string;
  /** The streamed text so far, then the final answer. */
  text: string;
  answer: AnswerDto | null;
  error: string | null;
  /** The day the question was asked as of (`null`: today). */
  asOf: string | null;
}

/** Splits an answer into text and `[n]` citation buttons (for the `n` that were cited). */
export function withCitations(text: string, cited: number[], onCite: (n: number) => void) {
  const parts = text.split(/(\[\d+\])/g);
  return parts.map((p, i) => {
    const m = /^\[(\d+)\]$/.exec(p);
    const n = m ? Number(m[1]) : 0;
    if (m && cited.includes(n)) {
      return (
        <button key={i} className="citation" data-testid="citation" data-n={n} onClick={() => onCite(n)} title={translate(getLang(), "chat.citeTitle")}>
          [{n}]
        </button>
      );
    }
    return <Fragment key={i}>{p}</Fragment>;
  });
}

/** Questions answered from memory, streamed, with citations that open the notes. */
export default function ChatView() {
  const { openNote, setHighlight, setGraphFocus, go, asOf } = useApp();
  const { t } = useT();
  const day = useDay();
  const [turns, setTurns] = useState<Turn[]>([]);
  const [q, setQ] = useState("");
  const [busy, setBusy] = useState(false);
  const end = useRef<HTMLDivElement>(null);

  useEffect(() => end.current?.scrollIntoView?.({ block: "end" }), [turns]);

  const send = async () => {
    const question = q.trim();
    if (!question || busy) return;
    setQ("");
    setBusy(true);
    const history: ChatTurnDto[] = turns
      .filter((t) => t.answer)
      .slice(-6)
      .map((t) => ({ question: t.question, answer: t.answer?.answer ?? "" }));
    const idx = turns.length;
    setTurns((ts) => [...ts, { question, text: "", answer: null, error: null, asOf }]);
    const update = (f: (t: Turn) => Turn) => setTurns((ts) => ts.map((t, i) => (i === idx ? f(t) : t)));
    try {
      const answer = await api.ask(question, history, asOf, (tok) => update((t) => ({ ...t, text: t.text + tok })));
      update((t) => ({ ...t, text: answer.answer, answer }));
      setHighlight(answer.citations.map((c) => c.id));
    } catch (e) {
      update((t) => ({ ...t, error: errorText(e) }));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="view" style={{ display: "flex", flexDirection: "column" }}>
      <h2>{t("chat.title")}</h2>
      <AsOf />
      <div className="chat-log grow" style={{ overflow: "auto" }}>
        {turns.length === 0 && (
          <Empty title={t("chat.emptyTitle")}>
            {t("chat.emptyBody")}
          </Empty>
        )}
        {turns.map((turn, i) => (
          <Fragment key={i}>
            <div className="msg user" translate="no">
              {turn.question}
            </div>
            {turn.asOf && (
              <div className="small muted" data-testid="chat-as-of" data-day={turn.asOf}>
                {t("chat.asOf", { day: day(turn.asOf) })}
              </div>
            )}
            <div className="msg card" data-testid="chat-answer" data-done={turn.answer ? "true" : "false"} data-not-in-memory={turn.answer?.not_in_memory ? "true" : "false"}>
              {turn.answer?.not_in_memory && <div className="warning"><strong>{t("chat.notInMemory")}</strong> {t("chat.notInMemoryBody")}</div>}
              <div className="content" translate="no" aria-live="polite" aria-busy={turn.answer || turn.error ? "false" : "true"}>
                {withCitations(turn.text || (turn.error ? "" : "…"), turn.answer?.citations.map((c) => c.n) ?? [], (n) => {
                  const c = turn.answer?.citations.find((x) => x.n === n);
                  if (!c) return;
                  setHighlight([c.id]);
                  setGraphFocus({ center: null, depth: 1, boxId: null });
                  openNote(c.id);
                })}
              </div>
              {turn.error && <div className="error">{turn.error}</div>}
              {turn.answer?.citations_inferred && turn.answer.citations.length > 0 && (
                <div className="small muted" style={{ marginTop: 6 }} data-testid="chat-sources-inferred">
                  {t("chat.sourcesInferred")}
                </div>
              )}
              {turn.answer && turn.answer.citations.length > 0 && (
                <ol className="small muted" style={{ margin: "6px 0 0", paddingLeft: 20 }}>
                  {turn.answer.citations.map((c) => (
                    <li key={c.n}>
                      <button className="citation" style={{ fontWeight: 400 }} data-testid="chat-source" onClick={() => openNote(c.id)} translate="no">
                        {c.preview}
                      </button>
                    </li>
                  ))}
                </ol>
              )}
              {turn.answer && turn.answer.citations.length > 0 && (
                <button className="small" style={{ marginTop: 6 }} onClick={() => go("graph")}>
                  {t("chat.showInGraph")}
                </button>
              )}
            </div>
          </Fragment>
        ))}
        <div ref={end} />
      </div>
      <div className="row" style={{ marginTop: 8 }}>
        <textarea
          className="grow"
          rows={2}
          data-testid="chat-input"
          placeholder={t("chat.placeholder")}
          value={q}
          onChange={(e) => setQ(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey) {
              e.preventDefault();
              void send();
            }
          }}
          aria-label={t("chat.question")}
        />
        <button className="primary" data-testid="chat-send" disabled={busy || !q.trim()} onClick={() => void send()}>
          {busy ? t("chat.answering") : t("chat.ask")}
        </button>
      </div>
    </div>
  );
}
