import { closeSync, fstatSync, mkdirSync, openSync, statSync, writeSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { silentLogger, type Logger } from '@brine/core'
import type { Caller } from '../authorize.js'
import type { EventBus } from '../event-bus.js'
import { maskSecrets } from './mask.js'

/** Records waiting for the disk at most; past it they are dropped and counted in the log (the bus still carries them). */
const MAX_PENDING_LINES = 100_000

/** Appends all of `text` to the file open for appending as `fd`. */
function appendAll(fd: number, text: string): void {
  const bytes = Buffer.from(text)
  let written = 0
  while (written < bytes.length) written += writeSync(fd, bytes, written)
}

/** The bus tag of an audit record: `brine/audit/<publish|runner|wheel>` (not one of Salt's tags). */
export const auditTag = (cmd: string): string => `brine/audit/${cmd}`

/** One call as the audit log records it: who, from where, what, when, its jid and what came of it. */
export interface AuditRecord {
  /** ISO time the master decided. */
  time: string
  cmd: 'publish' | 'runner' | 'wheel'
  user: string
  /** How the caller proved who they are: `key` (the root key), `token`/`eauth` (and `eauth`, the backend), `master`, `reactor`, `schedule`. */
  auth: Caller['auth']
  eauth?: string
  /** Where the call came from (`client`: cli, api, syndic, reactor, schedule, runner, library; the addresses known). */
  via: Record<string, unknown>
  fun: string
  tgt?: unknown
  tgt_type?: string
  /** Arguments with values that look like secrets masked. */
  arg?: unknown
  kwarg?: unknown
  jid?: string
  result: 'accepted' | 'refused'
  /** Accepted publishes: the minions expected to answer. */
  minions?: string[]
  /** Refusals: the rule that refused it, as the refusal said. */
  reason?: string
}

/** What a call to audit carries, before the time and masking are added. */
export type AuditCall = Omit<AuditRecord, 'time' | 'user' | 'auth' | 'eauth' | 'via'>

/** Filters of `jobs.audit`. */
export interface AuditQuery {
  user?: string
  fun?: string
  cmd?: string
  result?: string
  jid?: string
  /** The newest `limit` records (default 100). */
  limit?: number
}

/**
 * Where the audit log goes: `audit_log`; unset (a Master embedded as a library, its config not loaded from files),
 * `<cachedir>/audit`. Daemons load their config with loadConfig, which sets it to `audit` beside `log_file`.
 */
export function auditLogPath(opts: { audit_log?: unknown; cachedir: string }): string {
  return typeof opts.audit_log === 'string' && opts.audit_log !== '' ? opts.audit_log : join(opts.cachedir, 'audit')
}

/**
 * The audit log: one JSON line per publish, runner and wheel call (accepted or refused) appended to
 * `audit_log`, and the same record fired as `brine/audit/<cmd>`. Lines are appended through a descriptor kept
 * open while the path still names the file it opened (a stat before each write: an open per line cost
 * every publish a thread-pool round trip more), so after logrotate moves the file the next line starts a
 * new one (no reopen signal needed). The records of one turn of the event loop are appended together, at its
 * end, by a synchronous write: a line to the page cache costs less than the hand-off to a thread-pool thread
 * and back, which woke two threads per publish. A write that fails is logged, never thrown at the caller:
 * refusing a job because the disk is full is not the audit's call.
 */
export class AuditLog {
  readonly path: string
  readonly #bus: EventBus | undefined
  readonly #logger: Logger
  /** Lines not written yet: the calls of one turn are written in one append. */
  #pending: string[] = []
  #flushQueued = false
  #dropped = 0
  /** The file lines are appended to, and which file it is (what the path must still name). */
  #file: { fd: number; dev: number; ino: number } | undefined
  /** After close(): a late line is still written, but no handle is kept. */
  #closed = false

  constructor(path: string, options: { bus?: EventBus; logger?: Logger } = {}) {
    this.path = path
    this.#bus = options.bus
    this.#logger = options.logger ?? silentLogger
    mkdirSync(dirname(path), { recursive: true, mode: 0o750 })
    // Created now, while a daemon may still be root, so the user it switches to can be given the file.
    closeSync(openSync(path, 'a', 0o600))
  }

  /** Records `call` made by `caller`. */
  record(caller: Caller, call: AuditCall): AuditRecord {
    const record: AuditRecord = {
      time: new Date().toISOString(),
      user: caller.user,
      auth: caller.auth,
      ...(caller.eauth === undefined ? {} : { eauth: caller.eauth }),
      via: { ...(caller.via ?? { client: 'library' }) },
      ...call,
      ...(call.arg === undefined ? {} : { arg: maskSecrets(call.arg) }),
      ...(call.kwarg === undefined ? {} : { kwarg: maskSecrets(call.kwarg) }),
    }
    if (this.#pending.length < MAX_PENDING_LINES) this.#pending.push(`${JSON.stringify(record)}\n`)
    else if (this.#dropped++ % 1000 === 0)
      this.#logger.error(`audit_log ${this.path}: ${MAX_PENDING_LINES} records wait for the disk; ${this.#dropped} dropped so far`)
    this.#kick()
    this.#bus?.fire(auditTag(call.cmd), { ...record })
    return record
  }

  /** Writes what waits once the calls of this turn are recorded. */
  #kick(): void {
    if (this.#flushQueued || this.#pending.length === 0) return
    this.#flushQueued = true
    queueMicrotask(() => {
      this.#flushQueued = false
      this.#flush()
    })
  }

  /** Writes what waits in one append. A failed write is logged; those lines are lost. */
  #flush(): void {
    const lines = this.#pending
    if (lines.length === 0) return
    this.#pending = []
    try {
      appendAll(this.#descriptor(), lines.join(''))
    } catch (error) {
      this.#logger.error(`audit_log ${this.path}: could not write ${lines.length} record(s)`, error)
      this.#release()
    }
    if (this.#closed) this.#release()
  }

  /** The descriptor to append to: the one held while the path still names its file, else the path opened (created 0600) anew. */
  #descriptor(): number {
    const held = this.#file
    if (held !== undefined) {
      const now = statSync(this.path, { throwIfNoEntry: false })
      if (now !== undefined && now.ino === held.ino && now.dev === held.dev) return held.fd
      this.#release()
    }
    const fd = openSync(this.path, 'a', 0o600)
    try {
      const { dev, ino } = fstatSync(fd)
      this.#file = { fd, dev, ino }
    } catch (error) {
      closeSync(fd)
      throw error
    }
    return fd
  }

  #release(): void {
    const held = this.#file
    this.#file = undefined
    if (held === undefined) return
    try {
      closeSync(held.fd)
    } catch {
      // Closing a descriptor only fails when it is already gone: nothing is held either way.
    }
  }

  /** Writes what waits and closes the file. */
  async close(): Promise<void> {
    this.#closed = true
    this.#flush()
    this.#release()
  }

  /** Resolves once every record so far is written. */
  async settle(): Promise<void> {
    this.#flush()
  }

  /** The records that match `query`, oldest first, at most `limit` of the newest. */
  async query(query: AuditQuery = {}): Promise<AuditRecord[]> {
    await this.settle()
    let text: string
    try {
      text = await readFile(this.path, 'utf8')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
      throw error
    }
    const matches: AuditRecord[] = []
    for (const line of text.split('\n')) {
      if (line === '') continue
      let record: AuditRecord
      try {
        record = JSON.parse(line) as AuditRecord
      } catch {
        continue // a line cut by a crash mid-write
      }
      if (query.user !== undefined && record.user !== query.user) continue
      if (query.fun !== undefined && record.fun !== query.fun) continue
      if (query.cmd !== undefined && record.cmd !== query.cmd) continue
      if (query.result !== undefined && record.result !== query.result) continue
      if (query.jid !== undefined && record.jid !== query.jid) continue
      matches.push(record)
    }
    return matches.slice(-(query.limit ?? 100))
  }
}
