import { useEffect, useState } from "react";
import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { abortable, api, type NoteDto } from "../../api";
import { keys } from "../../queries";

const ANY = { tag: null, enrich: null, box_id: null };

/** Notes matching `query` (search as you type; the newest notes while it is empty). */
export function useNoteSuggestions(query: string | null, exclude: string | null = null): NoteDto[] {
  const q = query?.trim() ?? "";
  // asked once the typing pauses; the newest notes at once
  const [settled, setSettled] = useState(q);
  useEffect(() => {
    const t = setTimeout(() => setSettled(q), q ? 120 : 0);
    return () => clearTimeout(t);
  }, [q]);
  const open = query !== null;
  const found = useQuery({
    queryKey: keys.search(settled, 8, ANY, null),
    queryFn: ({ signal }) => abortable(api.searchNotes(settled, 8, ANY, null), signal),
    enabled: open && settled !== "",
    // the suggestions shown stay until the next query's arrive
    placeholderData: keepPreviousData,
  });
  const newest = useQuery({
    queryKey: keys.notes(ANY, 8),
    queryFn: ({ signal }) => abortable(api.listNotes(ANY, 0, 8, null), signal),
    enabled: open && settled === "",
  });
  if (!open) return [];
  const ns = settled ? (found.data?.map((h) => h.note) ?? []) : (newest.data?.notes ?? []);
  // notes that contain what was typed come first (CJK included: plain substring)
  const lower = settled.toLowerCase();
  const has = (n: NoteDto) => n.content.toLowerCase().includes(lower);
  return [...ns.filter(has), ...ns.filter((n) => !has(n))].filter((n) => n.id !== exclude);
}
