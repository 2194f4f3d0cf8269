import type { ReactNode } from "react";

/** An empty state that says what the view is for and how to fill it. */
export default function Empty({ title, children }: { title: string; children: ReactNode }) {
  return (
    <div className="empty">
      <strong>{title}</strong>
      <div>{children}</div>
    </div>
  );
}
