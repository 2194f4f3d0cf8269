import { lineDiff } from "./linediff";

/** The text a revision replaced and the text it wrote, line by line. */
export default function TextDiff({ before, after }: { before: string; after: string }) {
  return (
    <pre className="text-diff" data-testid="history-content-diff">
      {lineDiff(before, after).map((d, k) => (
        <div key={k} className={d.op === "-" ? "del" : d.op === "+" ? "add" : undefined} data-op={d.op}>
          {d.op} {d.line}
        </div>
      ))}
    </pre>
  );
}
