// What the graph shows for each node and edge (sigma reducers) and the settings that keep
// large graphs cheap to draw. Pure functions, shared by the view and the benchmark page.
import type { Attributes } from "graphology-types";
import type { LinkKindWord } from "../../api";

/** Above this many notes the graph is drawn in its cheap mode (see `sigmaSettings`). */
export const BIG = 2000;
/**
 * Above this many notes the camera moves the last drawn frame instead of redrawing
 * (mountGraph): at 1,000 notes a full frame was already 95-150 ms in WebKitGTK's software
 * rendering and ~200 ms in headless Chromium.
 */
export const MOVE_FRAME = 500;
/**
 * Proposed links are drawn dashed on a 2D overlay up to this many; beyond that they are
 * drawn as amber GL lines: a dashed 2D stroke of ~1,000 lines cost 250-500 ms per frame in
 * WebKitGTK's software canvas (10k notes), against ~1 ms in Chromium.
 */
export const DASHED_MAX = 300;

export interface Filters {
  /** Lower-cased highlight text, "" for none. */
  search: string;
  tag: string;
  showProposed: boolean;
  highlightSet: Set<string>;
  boxMembers: Set<string> | null;
  center: string | null;
  /** Proposed links go to the dashed overlay (else amber GL lines). */
  dashed: boolean;
}

export interface Colours {
  dim: string;
  proposed: string;
}

/**
 * A `supersedes` link (a newer note replaced an older one's value) is drawn in its own
 * colour and thicker than the other links, in both themes.
 */
export const SUPERSEDES_COLOUR = "#8b5cf6";
export const SUPERSEDES_KIND = "supersedes" satisfies LinkKindWord;

/** The attributes of a link edge of `kind` (proposed ones are drawn dashed or amber). */
export function edgeAttributes(kind: string, proposed: boolean) {
  const supersedes = kind === SUPERSEDES_KIND;
  return { proposed, kind, supersedes, size: supersedes ? 2 : 1, color: supersedes ? SUPERSEDES_COLOUR : "#b6bdcc" };
}

export const coloursFor = (dark: boolean): Colours => ({
  dim: dark ? "#3a4152" : "#dfe3ea",
  proposed: dark ? "#e0a84a" : "#c0841a",
});

/** Whether the Box and tag filters let a node through. */
export function passes(f: Filters, id: string, a: Attributes): boolean {
  if (f.boxMembers && !f.boxMembers.has(id)) return false;
  if (f.tag && !(a.tags as string[]).includes(f.tag)) return false;
  return true;
}

/**
 * The node reducer. Sigma hands it a fresh shallow copy of the attributes, so it changes
 * that copy in place (no object spread per node per refresh); with no filter, highlight or
 * focus it returns at once.
 */
export function nodeReducer(filters: () => Filters, colours: Colours) {
  return (id: string, a: Attributes): Attributes => {
    const f = filters();
    if (!passes(f, id, a)) {
      a.hidden = true;
      return a;
    }
    const marking = f.search !== "" || f.highlightSet.size > 0;
    if (!marking && f.center === null) return a;
    const hit = f.highlightSet.has(id) || (f.search !== "" && String(a.label ?? "").toLowerCase().includes(f.search));
    if (hit || id === f.center) {
      a.size = (a.size as number) * 1.8;
      a.highlighted = true;
      a.zIndex = 2;
    } else if (marking) {
      a.color = colours.dim;
      a.label = "";
      a.zIndex = 0;
    }
    return a;
  };
}

/**
 * The edge reducer. Edges of hidden nodes are hidden by sigma itself, so only proposed
 * links need work: hidden (drawn dashed on the overlay, or switched off) or amber lines.
 */
export function edgeReducer(filters: () => Filters, colours: Colours) {
  return (_id: string, a: Attributes): Attributes => {
    if (!a.proposed) return a;
    const f = filters();
    if (f.dashed || !f.showProposed) a.hidden = true;
    else a.color = colours.proposed;
    return a;
  };
}

/**
 * Sigma settings by graph size. Large graphs: fewer and larger-only labels, no z-ordering
 * (highlighted nodes are drawn on top by sigma anyway); no edge picking for any. (Large
 * graphs also draw 1-pixel GL lines and do not redraw while the camera moves: mountGraph.)
 * Edges and labels stay on while moving: `hideEdgesOnMove` would make sigma reprocess the
 * whole graph after every drag.
 */
export function sigmaSettings(order: number) {
  const big = order > BIG;
  return {
    renderEdgeLabels: false,
    enableEdgeEvents: false,
    zIndex: !big,
    hideEdgesOnMove: false,
    hideLabelsOnMove: false,
    labelRenderedSizeThreshold: big ? 12 : 6,
    labelDensity: big ? 0.5 : 1,
    labelGridCellSize: big ? 150 : 100,
  };
}
