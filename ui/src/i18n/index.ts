// The UI's languages: English and Simplified Chinese. Every string the UI shows is a key of
// `en` (en.ts); `zh` (zh.ts) has the same keys, checked by the type checker. The language
// follows the system (navigator.languages) unless one is chosen in Settings; the choice is a
// preference of this computer, kept in localStorage.
import { useSyncExternalStore } from "react";
import type { ActionWord, ActorWord, Enrich, LinkKindWord, OpKind, ReviewStatus, Tier, ViaKind } from "../bindings";
import { en, type Key, type Plural } from "./en";
import { zh } from "./zh";

export type { Key } from "./en";
export type Lang = "en" | "zh";
/** What Settings offers: follow the system, or one language. */
export type LangChoice = "system" | Lang;

export const LANGS: Lang[] = ["en", "zh"];
/** BCP 47 tags for Intl and `<html lang>`. */
export const LOCALE: Record<Lang, string> = { en: "en", zh: "zh-CN" };
const DICTS: Record<Lang, Record<Key, string | Plural>> = { en, zh };
export const STORAGE_KEY = "kasten.ui.language";

/** The language of the system's first preferred language we have; English otherwise. */
export function systemLang(languages: readonly string[] = navigatorLanguages()): Lang {
  for (const l of languages) {
    const p = l.toLowerCase();
    if (p.startsWith("zh")) return "zh";
    if (p.startsWith("en")) return "en";
  }
  return "en";
}

function navigatorLanguages(): readonly string[] {
  if (typeof navigator === "undefined") return [];
  return navigator.languages?.length ? navigator.languages : [navigator.language];
}

function readChoice(): LangChoice {
  try {
    const v = window.localStorage.getItem(STORAGE_KEY);
    return v === "en" || v === "zh" ? v : "system";
  } catch {
    return "system";
  }
}

let choice: LangChoice = readChoice();
let lang: Lang = choice === "system" ? systemLang() : choice;
const listeners = new Set<() => void>();

function applyDocumentLang() {
  // `lang` lets the webview pick CJK glyphs from a Chinese font rather than a Japanese one
  if (typeof document !== "undefined") document.documentElement.lang = LOCALE[lang];
}
applyDocumentLang();

export function getLang(): Lang {
  return lang;
}

export function getChoice(): LangChoice {
  return choice;
}

/** Chooses the UI language (kept for this computer) and re-renders every translated view. */
export function setLangChoice(c: LangChoice) {
  choice = c;
  try {
    if (c === "system") window.localStorage.removeItem(STORAGE_KEY);
    else window.localStorage.setItem(STORAGE_KEY, c);
  } catch {
    /* no storage: the choice lasts this session */
  }
  lang = c === "system" ? systemLang() : c;
  applyDocumentLang();
  for (const f of listeners) f();
}

function subscribe(f: () => void) {
  listeners.add(f);
  return () => listeners.delete(f);
}

export function isKey(k: string): k is Key {
  return Object.prototype.hasOwnProperty.call(en, k);
}

export type Params = Record<string, string | number>;

/** `key` in `l`, `{name}` replaced by `params.name` (numbers formatted for the language);
 *  a plural entry picks its form by `params.count`. */
export function translate(l: Lang, key: Key, params?: Params): string {
  const v = DICTS[l][key] ?? en[key];
  let s: string;
  if (typeof v === "string") s = v;
  else {
    const n = Number(params?.count ?? 0);
    s = new Intl.PluralRules(LOCALE[l]).select(n) === "one" ? v.one : v.other;
  }
  if (!params) return s;
  return s.replace(/\{(\w+)\}/g, (m, name: string) => {
    const p = params[name];
    if (p === undefined) return m;
    return typeof p === "number" ? formatNumber(l, p) : p;
  });
}

export function formatNumber(l: Lang, n: number, opts?: Intl.NumberFormatOptions): string {
  return new Intl.NumberFormat(LOCALE[l], opts).format(n);
}

/** A date and time as the language writes them. */
export function formatDateTime(l: Lang, iso: string | number | Date): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return new Intl.DateTimeFormat(LOCALE[l], { dateStyle: "medium", timeStyle: "short" }).format(d);
}

export interface I18n {
  lang: Lang;
  choice: LangChoice;
  t: (key: Key, params?: Params) => string;
  /** A number with the language's separators; `digits` fixes the fraction digits. */
  num: (n: number, digits?: number) => string;
  date: (iso: string | number | Date) => string;
  /** An identifier the engine sends (a status, a link kind, an action) in words, when the
   *  dictionary has `prefix.value`; otherwise the identifier itself. */
  w: (prefix: string, value: string) => string;
  setChoice: (c: LangChoice) => void;
}

function make(l: Lang, c: LangChoice): I18n {
  return {
    lang: l,
    choice: c,
    t: (key, params) => translate(l, key, params),
    num: (n, digits) =>
      formatNumber(l, n, digits === undefined ? undefined : { minimumFractionDigits: digits, maximumFractionDigits: digits }),
    date: (iso) => formatDateTime(l, iso),
    w: (prefix, value) => {
      const k = `${prefix}.${value}`;
      return isKey(k) ? translate(l, k) : value;
    },
    setChoice: setLangChoice,
  };
}

const cache = new Map<string, I18n>();
function snapshot(): I18n {
  const k = `${lang}/${choice}`;
  let v = cache.get(k);
  if (!v) {
    v = make(lang, choice);
    cache.set(k, v);
  }
  return v;
}

/** The current language's `t`, number and date formatting; re-renders on a change. */
export function useT(): I18n {
  return useSyncExternalStore(subscribe, snapshot, snapshot);
}

/**
 * The text a person reads in `root` as UI (text, options, placeholders, titles, labels),
 * leaving out what is marked `translate="no"`: notes, annotations and other user or model
 * data, which stay in the language they were written in.
 */
export function uiText(root: Element): string {
  const out: string[] = [];
  const walk = (el: Element) => {
    if (el.getAttribute("translate") === "no") return;
    for (const a of ["placeholder", "title", "aria-label"]) {
      const v = el.getAttribute(a);
      if (v) out.push(v);
    }
    for (const n of Array.from(el.childNodes)) {
      if (n.nodeType === 3) {
        const v = (n.textContent ?? "").trim();
        if (v) out.push(v);
      } else if (n.nodeType === 1) walk(n as Element);
    }
  };
  walk(root);
  return out.join("\n");
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * The English UI strings (the text between placeholders, 4 characters or more, that Chinese
 * writes differently) found as whole words in `text`: what a Chinese UI must not show. The
 * e2e suite calls it in the app through `window.__kastenI18n`.
 */
export function englishLeft(text: string): string[] {
  const found = new Set<string>();
  // a fragment some Chinese string also shows (a path, a product name) may stay
  const zhAll = Object.values(zh)
    .flatMap((z) => (typeof z === "string" ? [z] : [z.one, z.other]))
    .join("\n");
  for (const key of Object.keys(en) as Key[]) {
    const e = en[key];
    const z = zh[key];
    const forms = typeof e === "string" ? [e] : [e.one, e.other];
    const zforms = typeof z === "string" ? [z] : [z.one, z.other];
    for (const f of forms) {
      for (const frag of f.split(/\{\w+\}/)) {
        const s = frag.trim();
        if (s.length < 4 || !/[A-Za-z]{3}/.test(s) || zforms.some((zf) => zf.includes(s)) || zhAll.includes(s)) continue;
        if (new RegExp(`(^|[^A-Za-z])${escape(s)}($|[^A-Za-z])`).test(text)) found.add(s);
      }
    }
  }
  return [...found];
}

declare global {
  interface Window {
    __kastenI18n?: { englishLeft: (text: string) => string[]; uiText: (root: Element) => string; getLang: () => Lang };
  }
}
if (typeof window !== "undefined") window.__kastenI18n = { englishLeft, uiText, getLang };

/** Every word of the engine's unions that the UI shows with `w(prefix, word)` has its text
 *  in the dictionary (zh.ts follows en.ts by type): a new word in bindings.ts without one
 *  fails tsc here. */
type Shown =
  | `kind.${LinkKindWord}`
  | `action.${ActionWord}`
  | `actor.${ActorWord}`
  | `status.${ReviewStatus}`
  | `tier.${Tier}`
  | `via.${ViaKind}`
  | `change.${OpKind}`
  | `notes.${Exclude<Enrich, "done">}`;
export const EVERY_SHOWN_WORD_HAS_TEXT: [Shown] extends [Key] ? true : never = true;
