import { useEffect, useState } from "react";
import { api, type NoteDto } from "../../api";

/** Notes matching `query` (search as you type; the newest notes while it is empty). */
export function useNoteSuggestions(query: string | null, exclude: string | null = null): NoteDto[] {
  const [hits, setHits] = useState<NoteDto[]>([]);
  useEffect(() => {
    if (query === null) {
      setHits([]);
      return;
    }
    let live = true;
    const q = query.trim();
    const t = setTimeout(
      () => {
        const found = q
          ? api.searchNotes(q, 8, { tag: null, enrich: null, box_id: null }, null).then((hs) => hs.map((h) => h.note))
          : api.listNotes({ tag: null, enrich: null, box_id: null }, 0, 8).then((p) => p.notes);
        found
          .then((ns) => {
            if (!live) return;
            // notes that contain what was typed come first (CJK included: plain substring)
            const lower = q.toLowerCase();
            const has = (n: NoteDto) => n.content.toLowerCase().includes(lower);
            const ranked = [...ns.filter(has), ...ns.filter((n) => !has(n))];
            setHits(ranked.filter((n) => n.id !== exclude));
          })
          .catch(() => live && setHits([]));
      },
      q ? 120 : 0,
    );
    return () => {
      live = false;
      clearTimeout(t);
    };
  }, [query, exclude]);
  return hits;
}
