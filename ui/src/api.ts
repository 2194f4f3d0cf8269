// The one place the UI talks to the shell: the generated bindings, with results unwrapped
// into values or a thrown ApiError (kind + a sentence for the user).
import { Channel } from "@tauri-apps/api/core";
import { commands, events } from "./bindings";
import type {
  AppError,
  FieldsInput,
  NoteFilterInput,
  SettingsInput,
  LlmPick,
  ModelProgressDto,
  ChatTurnDto,
  ImportProgressDto,
  TransferProgressDto,
  JobEvent,
  StatusEvent,
} from "./bindings";

export type * from "./bindings";

export class ApiError extends Error {
  kind: AppError["kind"];
  constructor(e: AppError) {
    super(e.message);
    this.kind = e.kind;
  }
}

type R<T> = { status: "ok"; data: T } | { status: "error"; error: AppError };

async function un<T>(p: Promise<R<T>>): Promise<T> {
  const r = await p;
  if (r.status === "ok") return r.data;
  throw new ApiError(r.error);
}

/** A message for any error a call can throw. */
export function errorText(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}

function channel<T>(onMessage: (m: T) => void): Channel<T> {
  const ch = new Channel<T>();
  ch.onmessage = onMessage;
  return ch;
}

export const api = {
  status: () => un(commands.appStatus()),
  addNote: (content: string) => un(commands.addNote(content)),
  listNotes: (filter: NoteFilterInput, offset: number, limit: number) =>
    un(commands.listNotes(filter, offset, limit)),
  /** Search; with `asOf` (`YYYY-MM-DD`), what was current that day. */
  search: (query: string, k: number, filter: NoteFilterInput, asOf: string | null = null) =>
    un(commands.searchNotes(query, k, filter, asOf)),
  getNote: (id: string) => un(commands.getNote(id)),
  editNote: (id: string, fields: FieldsInput) => un(commands.editNote(id, fields)),
  deleteNote: (id: string) => un(commands.deleteNote(id)),
  listTags: (limit: number) => un(commands.listTags(limit)),
  graphNodes: (after: string | null, limit: number) => un(commands.graphNodes(after, limit)),
  graphLinks: (after: string | null, limit: number) => un(commands.graphLinks(after, limit)),
  localGraph: (id: string, depth: number) => un(commands.localGraph(id, depth)),
  reviewQueue: (statuses: string[], offset: number, limit: number, by: string | null = null) =>
    un(commands.reviewQueue(statuses, offset, limit, by)),
  accept: (id: string, edit: FieldsInput | null) => un(commands.reviewAccept(id, edit)),
  reject: (id: string) => un(commands.reviewReject(id)),
  /** A supersession whose two notes do not conflict: removed, and never proposed again. */
  bothTrue: (id: string) => un(commands.reviewBothTrue(id)),
  rollback: (id: string) => un(commands.reviewRollback(id)),
  reapply: (id: string) => un(commands.reviewReapply(id)),
  bulkAccept: (minConfidence: number) => un(commands.reviewBulkAccept(minConfidence)),
  listEvents: (limit: number) => un(commands.listEvents(limit)),
  retryFailed: () => un(commands.retryFailed()),
  loadSample: () => un(commands.loadSampleNotebook()),
  getSettings: () => un(commands.getSettings()),
  saveSettings: (input: SettingsInput) => un(commands.saveSettings(input)),
  testConnection: (input: SettingsInput) => un(commands.testConnection(input)),
  llmOverview: () => un(commands.llmOverview()),
  useLlm: (pick: LlmPick) => un(commands.useLlm(pick)),
  /** The catalog's built-in models (Settings → Models). */
  builtinModels: () => un(commands.builtinModels()),
  /** Downloads and installs one; resolves with the new list when it is installed. */
  installModel: (name: string, onProgress: (p: ModelProgressDto) => void) =>
    un(commands.installModel(name, channel(onProgress))),
  cancelModelInstall: (name: string) => un(commands.cancelModelInstall(name)),
  removeModel: (name: string) => un(commands.removeModel(name)),
  insights: () => un(commands.insights()),
  listBoxes: (limit: number) => un(commands.listBoxes(limit)),
  linkKinds: () => un(commands.linkKinds()),
  linkNotes: (from: string, to: string, kind: string | null, reason: string) =>
    un(commands.linkNotes(from, to, kind, reason)),
  unlinkNotes: (from: string, to: string, kind: string | null) => un(commands.unlinkNotes(from, to, kind)),
  editContent: (id: string, content: string) => un(commands.editContent(id, content)),
  noteLifecycle: (id: string) => un(commands.noteLifecycle(id)),
  fadingNotes: (limit: number) => un(commands.fadingNotes(limit)),
  archivedNotes: (offset: number, limit: number) => un(commands.archivedNotes(offset, limit)),
  archiveNote: (id: string) => un(commands.archiveNote(id)),
  restoreNote: (id: string) => un(commands.restoreNote(id)),
  keepNote: (id: string) => un(commands.keepNote(id)),
  setNoteTier: (id: string, tier: string, project: string | null) => un(commands.setNoteTier(id, tier, project)),
  listProjects: () => un(commands.listProjects()),
  setProjectOpen: (name: string, open: boolean) => un(commands.setProjectOpen(name, open)),
  /** Imports a folder or file from this computer; `onProgress` receives the progress. */
  importPath: (path: string, format: string, onProgress: (p: ImportProgressDto) => void) => {
    const ch = new Channel<ImportProgressDto>();
    ch.onmessage = onProgress;
    return un(commands.importPath(path, format, ch));
  },
  /** Writes every note into `dir` as an Obsidian vault (a new folder inside it when it holds files). */
  exportVault: (dir: string, onProgress: (p: TransferProgressDto) => void) =>
    un(commands.exportVault(dir, channel(onProgress))),
  /** Writes a full backup of the memory to `file`. */
  backupMemory: (file: string, onProgress: (p: TransferProgressDto) => void) =>
    un(commands.backupMemory(file, channel(onProgress))),
  /** Replaces the memory with the backup `file`; the memory as it was is kept beside it. */
  restoreMemory: (file: string, onProgress: (p: TransferProgressDto) => void) =>
    un(commands.restoreMemory(file, channel(onProgress))),
  /** Asks the memory (as of `asOf`, `YYYY-MM-DD`, when given); `onToken` receives the answer as it streams. */
  ask: (question: string, history: ChatTurnDto[], onToken: (t: string) => void, asOf: string | null = null) => {
    const ch = new Channel<string>();
    ch.onmessage = onToken;
    return un(commands.ask(question, history, asOf, ch));
  },
};

export type Api = typeof api;

export function onJob(cb: (e: JobEvent) => void): Promise<() => void> {
  return events.jobEvent.listen((e) => cb(e.payload));
}

export function onStatus(cb: (e: StatusEvent) => void): Promise<() => void> {
  return events.statusEvent.listen((e) => cb(e.payload));
}
