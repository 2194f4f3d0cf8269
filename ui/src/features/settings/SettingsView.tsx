import { useEffect, useState } from "react";
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { abortable, api, errorText, type PolicyWord, type Provider, type SettingsDto, type SettingsInput } from "../../api";
import { POLICIES, SERVER_PROVIDERS, wordOf } from "../../states";
import { useApp } from "../../app-context";
import { keys, useChanged } from "../../queries";
import ImportPanel from "./ImportPanel";
import TransferPanel from "./TransferPanel";
import LlmPanel from "./LlmPanel";
import ModelsPanel from "./ModelsPanel";
import LanguagePanel from "./LanguagePanel";
import { useT, type Key } from "../../i18n";

const POLICY_TEXT: Record<PolicyWord, Key> = { auto: "settings.policyAuto", review: "settings.policyReview" };

/** A server's protocol by the name people know it by; OpenAI's is said in words. */
const PROVIDER_LABEL: Partial<Record<Provider, string>> = { ollama: "Ollama" };

const KEY_TEXT: Record<SettingsDto["api_key_storage"], Key> = {
  none: "settings.keyNone",
  keyring: "settings.keyKeyring",
  settings: "settings.keySettings",
  environment: "settings.keyEnv",
};

/** LLM server, model, key, k and review policy; "test connection" tries them unsaved. */
export default function SettingsView() {
  const { toast } = useApp();
  const changed = useChanged();
  const client = useQueryClient();
  // the form edits a copy of the settings; it is replaced when the settings are read again
  // (saved here, or the LLM in use chosen in a panel above)
  const q = useQuery({ queryKey: keys.settings(), queryFn: ({ signal }) => abortable(api.getSettings(), signal) });
  const [s, setS] = useState<SettingsDto | null>(null);
  const [key, setKey] = useState("");
  const [msg, setMsg] = useState<{ text: string; bad: boolean } | null>(null);
  const [warning, setWarning] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const { t } = useT();
  useEffect(() => {
    if (q.data) setS(q.data);
  }, [q.data]);
  useEffect(() => {
    if (q.error) setMsg({ text: errorText(q.error), bad: true });
  }, [q.error]);

  if (!s)
    return (
      <div className="view" data-testid="settings">
        {msg ? <div className="error">{msg.text}</div> : t("common.loading")}
      </div>
    );

  const input = (): SettingsInput => ({
    provider: s.provider,
    base_url: s.base_url,
    model: s.model,
    timeout_secs: s.timeout_secs,
    api_key: key === "" ? null : key,
    k: s.k,
    links_policy: s.links_policy,
    edits_policy: s.edits_policy,
    auto_accept_confidence: s.auto_accept_confidence,
  });
  const env = (v: string) => s.env_overrides.includes(v);
  const envNote = (v: string) => (env(v) ? <span className="small warning">{t("settings.envWins", { name: v })}</span> : null);

  return (
    <div className="view" data-testid="settings">
      <h2>{t("settings.title")}</h2>
      <LanguagePanel />
      <LlmPanel />
      <ModelsPanel />
      <form
        className="card"
        style={{ maxWidth: 720 }}
        onSubmit={(e) => {
          e.preventDefault();
          setBusy(true);
          api
            .saveSettings(input())
            .then((r) => {
              client.setQueryData(keys.settings(), r.settings);
              setKey("");
              setWarning(r.warning);
              setMsg({ text: t("settings.saved"), bad: false });
              toast(t("settings.savedToast"));
              changed({ kind: "settingsSaved" });
            })
            .catch((e) => setMsg({ text: errorText(e), bad: true }))
            .finally(() => setBusy(false));
        }}
      >
        <h3 style={{ marginTop: 0, fontSize: 14 }}>{t("settings.byHand")}</h3>
        <div className="field">
          <label htmlFor="provider">{t("settings.provider")}</label>
          <div>
            <select id="provider" value={s.provider} onChange={(e) => setS({ ...s, provider: wordOf(SERVER_PROVIDERS, e.target.value) ?? s.provider })}>
              {SERVER_PROVIDERS.map((p) => (
                <option key={p} value={p}>
                  {PROVIDER_LABEL[p] ?? t("settings.providerOpenai")}
                </option>
              ))}
            </select>
            {envNote("KASTEN_LLM_PROVIDER")}
          </div>
        </div>
        <div className="field">
          <label htmlFor="base_url">{t("settings.baseUrl")}</label>
          <div>
            <input
              id="base_url"
              style={{ width: "100%" }}
              placeholder={s.provider === "ollama" ? "http://127.0.0.1:11434" : "http://127.0.0.1:8080/v1"}
              value={s.base_url}
              onChange={(e) => setS({ ...s, base_url: e.target.value })}
            />
            {envNote("KASTEN_LLM_BASE_URL")}
          </div>
        </div>
        <div className="field">
          <label htmlFor="model">{t("settings.model")}</label>
          <div>
            <input id="model" value={s.model} onChange={(e) => setS({ ...s, model: e.target.value })} />
            {envNote("KASTEN_LLM_MODEL")}
          </div>
        </div>
        <div className="field">
          <label htmlFor="key">{t("settings.apiKey")}</label>
          <div>
            <input id="key" type="password" autoComplete="off" placeholder={t("settings.keepKey")} value={key} onChange={(e) => setKey(e.target.value)} />
            <div className="small muted">{t(KEY_TEXT[s.api_key_storage])}</div>
            {s.api_key_storage === "settings" && (
              <div className="small warning">{t("settings.keyWarning")}</div>
            )}
          </div>
        </div>
        <div className="field">
          <label htmlFor="timeout">{t("settings.timeout")}</label>
          <input id="timeout" type="number" min={1} max={3600} value={s.timeout_secs} onChange={(e) => setS({ ...s, timeout_secs: Number(e.target.value) })} />
        </div>
        <h3 style={{ fontSize: 14 }}>{t("settings.memory")}</h3>
        <div className="field">
          <label htmlFor="k">{t("settings.k")}</label>
          <input id="k" type="number" min={1} max={50} value={s.k} onChange={(e) => setS({ ...s, k: Number(e.target.value) })} />
        </div>
        <div className="field">
          <label htmlFor="links_policy">{t("settings.newLinks")}</label>
          <select id="links_policy" value={s.links_policy} onChange={(e) => setS({ ...s, links_policy: wordOf(POLICIES, e.target.value) ?? s.links_policy })}>
            {POLICIES.map((p) => (
              <option key={p} value={p}>
                {t(POLICY_TEXT[p])}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor="edits_policy">{t("settings.edits")}</label>
          <select id="edits_policy" value={s.edits_policy} onChange={(e) => setS({ ...s, edits_policy: wordOf(POLICIES, e.target.value) ?? s.edits_policy })}>
            {POLICIES.map((p) => (
              <option key={p} value={p}>
                {t(POLICY_TEXT[p])}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor="auto_conf">{t("settings.autoConf")}</label>
          <input
            id="auto_conf"
            type="number"
            min={0}
            max={1}
            step={0.05}
            placeholder={t("settings.never")}
            value={s.auto_accept_confidence ?? ""}
            onChange={(e) => setS({ ...s, auto_accept_confidence: e.target.value === "" ? null : Number(e.target.value) })}
          />
        </div>
        <div className="row">
          <button type="submit" className="primary" disabled={busy} data-testid="settings-save">
            {t("common.save")}
          </button>
          <button
            type="button"
            disabled={busy}
            data-testid="settings-test"
            onClick={() => {
              setBusy(true);
              setMsg(null);
              api
                .testConnection(input())
                .then((models) =>
                  setMsg({
                    text: t("settings.connected", { count: models.length, list: models.length ? `: ${models.slice(0, 8).join(", ")}` : "" }),
                    bad: false,
                  }),
                )
                .catch((e) => setMsg({ text: errorText(e), bad: true }))
                .finally(() => setBusy(false));
            }}
          >
            {t("settings.test")}
          </button>
        </div>
        {msg && (
          <p className={msg.bad ? "error" : ""} data-testid="settings-message">
            {msg.text}
          </p>
        )}
        {warning && <p className="warning">{warning}</p>}
      </form>
      <ImportPanel />
      <TransferPanel />
    </div>
  );
}
