import { useApp } from "../app-context";
import { LOCALE, useT } from "../i18n";

/** `YYYY-MM-DD`, the form the shell takes ("as of" a day). */
export const DAY = /^\d{4}-\d{2}-\d{2}$/;

/**
 * A day as the language writes it. The engine's dates are first moments of days in UTC
 * (a date a note states), or moments (a note's time): both shown as the UTC day.
 */
export function useDay() {
  const { lang } = useT();
  return (iso: string) => {
    const d = DAY.test(iso) ? new Date(`${iso}T00:00:00Z`) : new Date(iso);
    if (Number.isNaN(d.getTime())) return iso;
    return new Intl.DateTimeFormat(LOCALE[lang], { dateStyle: "medium", timeZone: "UTC" }).format(d);
  };
}

/**
 * The date control above Notes and Chat: a day, and Notes search and Chat answer with the
 * memory as it stood then (what was current that day); "back to today" clears it.
 */
export default function AsOf() {
  const { asOf, setAsOf } = useApp();
  const { t } = useT();
  const day = useDay();
  return (
    <div className="row small" data-testid="as-of" style={{ marginBottom: 8 }}>
      <label title={t("asOf.title")}>
        {t("asOf.label")}{" "}
        <input
          type="date"
          data-testid="as-of-date"
          aria-label={t("asOf.title")}
          value={asOf ?? ""}
          onChange={(e) => {
            const v = e.target.value;
            // a date input gives "" or a whole day; anything else is not sent to the shell
            setAsOf(DAY.test(v) ? v : null);
          }}
        />
      </label>
      {asOf && (
        <>
          <button className="small" data-testid="as-of-clear" onClick={() => setAsOf(null)}>
            {t("asOf.clear")}
          </button>
          <span className="muted" data-testid="as-of-active" data-day={asOf}>
            {t("asOf.active", { day: day(asOf) })}
          </span>
        </>
      )}
    </div>
  );
}
