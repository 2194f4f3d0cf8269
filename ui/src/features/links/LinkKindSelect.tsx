import { useQuery } from "@tanstack/react-query";
import { abortable, api } from "../../api";
import { keys } from "../../queries";
import { useT } from "../../i18n";

/** The kinds a link may have, as the engine lists them (`relates` until they arrive). */
export default function LinkKindSelect({
  value,
  onChange,
  testid = "link-kind",
}: {
  value: string;
  onChange: (k: string) => void;
  testid?: string;
}) {
  const { t, w } = useT();
  // the engine's list does not change while the app runs: asked once
  const q = useQuery({ queryKey: keys.linkKinds(), queryFn: ({ signal }) => abortable(api.linkKinds(), signal), staleTime: Infinity });
  const kinds = q.data ?? ["relates"];
  return (
    <select aria-label={t("link.kind")} data-testid={testid} value={value} onChange={(e) => onChange(e.target.value)}>
      {kinds.map((k) => (
        <option key={k} value={k}>
          {w("kind", k)}
        </option>
      ))}
    </select>
  );
}
