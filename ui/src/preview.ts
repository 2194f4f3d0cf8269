// Short previews of a note's text.

/**
 * `text` cut to at most `max` characters, with `…` when it was longer. Characters are
 * code points: a cut never splits an emoji's surrogate pair (`slice` counts UTF-16 units).
 */
export function preview(text: string, max: number): string {
  // at most max + 1 code points are read: a long note is not split whole
  const head: string[] = [];
  for (const c of text) {
    if (head.length > max) break;
    head.push(c);
  }
  return head.length > max ? `${head.slice(0, max).join("")}…` : text;
}
