// `[[` links typed in the editor: where the one being typed starts, what replaces it when a
// note is picked, and which picked notes the text still links to when it is saved.

/** The `[[query` being typed just before the caret, if any (no `]]` or line break yet). */
export function activeQuery(text: string, caret: number): { start: number; query: string } | null {
  const before = text.slice(0, caret);
  const start = before.lastIndexOf("[[");
  if (start < 0) return null;
  const query = before.slice(start + 2);
  if (query.includes("]]") || query.includes("\n") || query.length > 80) return null;
  return { start, query };
}

/** The words a link to a note shows: its first line, at most 40 characters, without brackets. */
export function linkLabel(content: string): string {
  const line = (content.split("\n").find((l) => l.trim()) ?? "").replace(/[[\]|]/g, "").trim();
  const chars = Array.from(line);
  return chars.length > 40 ? `${chars.slice(0, 40).join("").trimEnd()}…` : line;
}

/** `text` with `[[query` (from `start` to `caret`) replaced by `[[label]]`, and the caret after it. */
export function insertLink(text: string, start: number, caret: number, label: string): { text: string; caret: number } {
  const link = `[[${label}]]`;
  return { text: text.slice(0, start) + link + text.slice(caret), caret: start + link.length };
}

export type PickedLink = { id: string; label: string };

/** The picked notes whose `[[label]]` is still in the text, each once. */
export function linksInText(text: string, picked: PickedLink[]): PickedLink[] {
  const seen = new Set<string>();
  return picked.filter((p) => {
    if (seen.has(p.id) || !text.includes(`[[${p.label}]]`)) return false;
    seen.add(p.id);
    return true;
  });
}
