import { systemLang, useT, type LangChoice } from "../../i18n";

/** Settings → Language: follow the system, English or 简体中文 (kept for this computer). */
export default function LanguagePanel() {
  const { t, choice, setChoice } = useT();
  // each language is named in itself, so it can be found whatever the UI shows
  const names = { en: "English", zh: "简体中文" };
  return (
    <section className="card" style={{ maxWidth: 720, marginBottom: 12 }} data-testid="language-panel">
      <div className="field" style={{ marginBottom: 0 }}>
        <label htmlFor="ui-language">{t("settings.language")}</label>
        <div>
          <select id="ui-language" data-testid="settings-language" value={choice} onChange={(e) => setChoice(e.target.value as LangChoice)}>
            <option value="system">{t("settings.languageSystem", { lang: names[systemLang()] })}</option>
            <option value="en">{names.en}</option>
            <option value="zh">{names.zh}</option>
          </select>
          <div className="small muted">{t("settings.languageHint")}</div>
        </div>
      </div>
    </section>
  );
}
