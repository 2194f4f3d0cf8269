import { useQuery } from "@tanstack/react-query";
import { abortable, api, type LinkKindWord } from "../../api";
import { DEFAULT_LINK_KIND } from "../../states";
import { keys } from "../../queries";
import { useT } from "../../i18n";

/** The kinds a link may have, as the engine lists them (`relates` until they arrive). */
export default function LinkKindSelect({
  value,
  onChange,
  testid = "link-kind",
}: {
  value: LinkKindWord;
  onChange: (k: LinkKindWord) => void;
  testid?: string;
}) {
  const { t, w } = useT();
  // the engine's list does not change while the app runs: asked once
  const q = useQuery({ queryKey: keys.linkKinds(), queryFn: ({ signal }) => abortable(api.linkKinds(), signal), staleTime: Infinity });
  const kinds = q.data ?? [DEFAULT_LINK_KIND];
  return (
    <select aria-label={t("link.kind")} data-testid={testid} value={value} onChange={(e) => onChange(kinds.find((k) => k === e.target.value) ?? DEFAULT_LINK_KIND)}>
      {kinds.map((k) => (
        <option key={k} value={k}>
          {w("kind", k)}
        </option>
      ))}
    </select>
  );
}
