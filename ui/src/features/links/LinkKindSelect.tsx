import { useEffect, useState } from "react";
import { api } from "../../api";
import { useT } from "../../i18n";

/** The kinds a link may have, as the engine lists them (`relates` until they arrive). */
let cached: string[] | null = null;

export default function LinkKindSelect({
  value,
  onChange,
  testid = "link-kind",
}: {
  value: string;
  onChange: (k: string) => void;
  testid?: string;
}) {
  const [kinds, setKinds] = useState<string[]>(cached ?? ["relates"]);
  const { t, w } = useT();
  useEffect(() => {
    if (cached) return;
    let live = true;
    api
      .linkKinds()
      .then((k) => {
        cached = k;
        if (live) setKinds(k);
      })
      .catch(() => {});
    return () => {
      live = false;
    };
  }, []);
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
