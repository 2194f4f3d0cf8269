import { createContext, useContext } from "react";
import type { StatusEvent } from "./api";

export type View = "notes" | "graph" | "boxes" | "review" | "chat" | "insights" | "settings" | "fading";

export interface GraphFocus {
  /** Local graph around this note; `null` for the whole memory. */
  center: string | null;
  depth: number;
  /** Only the members of this Box. */
  boxId: string | null;
}

export interface AppCtx {
  view: View;
  go: (v: View) => void;
  /** Opens a note in the Notes view. */
  openNote: (id: string) => void;
  selected: string | null;
  /** Notes to highlight in the graph (chat citations, search). */
  highlight: string[];
  setHighlight: (ids: string[]) => void;
  graphFocus: GraphFocus;
  setGraphFocus: (f: GraphFocus) => void;
  toast: (msg: string) => void;
  /** The status as the status bar shows it (`null` until the first reading). */
  status: StatusEvent | null;
  /** Why the status cannot be read, if it cannot. */
  statusError: string | null;
  /**
   * The day (`YYYY-MM-DD`) Notes search and Chat answer as of, `null` for today: what was
   * current then (the date control above both views).
   */
  asOf: string | null;
  setAsOf: (day: string | null) => void;
}

export const Ctx = createContext<AppCtx | null>(null);

export function useApp(): AppCtx {
  const c = useContext(Ctx);
  if (!c) throw new Error("useApp outside the app");
  return c;
}
