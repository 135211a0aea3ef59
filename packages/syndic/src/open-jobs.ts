/**
 * The jobs a syndic passed down and has not finished forwarding, kept in a journal
 * (`<cachedir>/syndic/jobs.journal`, one JSON line per job opened or closed, fsynced) so that a syndic
 * that restarts knows which of its master's jobs to read back from the job cache: returns stored while
 * it was away are forwarded then, not lost. A job closes once every minion its master expected (and
 * every minion its lower syndics announced) has returned and that return was acknowledged upstairs or
 * spooled; a job whose minions never all return closes after `ttlMs`.
 */
import { mkdir, open, readFile, rename, type FileHandle } from 'node:fs/promises'
import { dirname } from 'node:path'
import { isJid } from '@brine/protocol'
import { silentLogger, type Logger } from '@brine/core'

/** One job being forwarded. */
export interface OpenJob {
  jid: string
  /** The upper master (`host:port`) the job came from: its returns go there. */
  master: string
  openedAt: number
  /** Minions expected to return (the lower master's, and those lower syndics announced). */
  expected: Set<string>
  /** Minions whose return was handed to the forwarder. */
  seen: Set<string>
  /** Minions whose return went up (acknowledged or spooled). */
  settled: Set<string>
  /** Lower syndics that have not announced their whole subtree yet. */
  pendingSyndics: Set<string>
  /**
   * False for a job read back from the journal: the minions lower syndics announced (and whether they
   * are still pending) are known again only once it is reconciled.
   */
  known: boolean
}

interface JournalLine {
  op: 'open' | 'close'
  jid: string
  master?: string
  at?: number
  /** The minions the lower master expected when the job was passed down. */
  minions?: string[]
}

export interface OpenJobsOptions {
  file: string
  /** How long a job stays open at most (its missing minions may never return). */
  ttlMs: number
  /** Jobs open at most; past it the oldest is closed (with a warning). */
  limit?: number
  logger?: Logger
}

export class OpenJobs {
  readonly file: string
  readonly #o: OpenJobsOptions
  readonly #logger: Logger
  readonly #jobs = new Map<string, OpenJob>()
  #handle: Promise<FileHandle> | undefined
  #writes: Promise<void> = Promise.resolve()

  constructor(options: OpenJobsOptions) {
    this.file = options.file
    this.#o = options
    this.#logger = options.logger ?? silentLogger
  }

  get size(): number {
    return this.#jobs.size
  }

  get(jid: string): OpenJob | undefined {
    return this.#jobs.get(jid)
  }

  all(): OpenJob[] {
    return [...this.#jobs.values()]
  }

  /** Reads the journal, keeps the jobs still open (and young enough), and rewrites it with only those. */
  async load(now = Date.now()): Promise<OpenJob[]> {
    await mkdir(dirname(this.file), { recursive: true, mode: 0o700 })
    let text = ''
    try {
      text = await readFile(this.file, 'utf8')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
    }
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue
      let entry: JournalLine
      try {
        entry = JSON.parse(line) as JournalLine
      } catch {
        continue // a torn last line
      }
      if (!isJid(entry.jid)) continue
      if (entry.op === 'close') this.#jobs.delete(entry.jid)
      else if (entry.op === 'open' && typeof entry.master === 'string') {
        const openedAt = typeof entry.at === 'number' ? entry.at : now
        if (now - openedAt > this.#o.ttlMs) continue
        // A later `open` line of the same job adds the minions its lower syndics announced.
        const job = this.#jobs.get(entry.jid) ?? blank(entry.jid, entry.master, openedAt, false)
        if (Array.isArray(entry.minions)) for (const id of entry.minions) if (typeof id === 'string') job.expected.add(id)
        this.#jobs.set(entry.jid, job)
      }
    }
    const temp = `${this.file}.tmp`
    const handle = await open(temp, 'w', 0o600)
    try {
      await handle.writeFile(
        this.all()
          .map((job) => `${line('open', job.jid, job.master, job.openedAt, [...job.expected])}\n`)
          .join(''),
      )
      await handle.sync()
    } finally {
      await handle.close()
    }
    await rename(temp, this.file)
    return this.all()
  }

  /** Records a job passed down (durably, before the caller goes on). */
  async open(jid: string, master: string, expected: readonly string[], pendingSyndics: readonly string[]): Promise<OpenJob> {
    const job = this.#jobs.get(jid) ?? blank(jid, master, Date.now(), true)
    job.known = true
    for (const id of expected) job.expected.add(id)
    for (const id of pendingSyndics) job.pendingSyndics.add(id)
    const fresh = !this.#jobs.has(jid)
    this.#jobs.set(jid, job)
    if (fresh) await this.#append(line('open', jid, master, job.openedAt, expected))
    this.#bound()
    return job
  }

  /** Minions a lower syndic announced for an open job: expected too, and journalled so a restarted syndic reads them back. */
  expect(jid: string, minions: readonly string[]): void {
    const job = this.#jobs.get(jid)
    if (job === undefined) return
    const fresh = minions.filter((id) => !job.expected.has(id))
    if (fresh.length === 0) return
    for (const id of fresh) job.expected.add(id)
    void this.#append(line('open', jid, job.master, job.openedAt, fresh))
  }

  /** Notes a return handed to the forwarder; true when every expected minion's has been (and no lower syndic is pending). */
  see(jid: string, minion: string): boolean {
    const job = this.#jobs.get(jid)
    if (job === undefined) return false
    job.seen.add(minion)
    if (!job.known || job.pendingSyndics.size > 0 || job.seen.size < job.expected.size) return false
    for (const id of job.expected) if (!job.seen.has(id)) return false
    return true
  }

  /** Marks returns as gone up; closes the job when it is complete. */
  settle(jid: string, minions: readonly string[]): void {
    const job = this.#jobs.get(jid)
    if (job === undefined) return
    for (const id of minions) job.settled.add(id)
    this.closeIfComplete(job)
  }

  /** Closes `job` if every expected minion has settled and no lower syndic is still pending. */
  closeIfComplete(job: OpenJob): boolean {
    if (!job.known || job.pendingSyndics.size > 0) return false
    for (const id of job.expected) if (!job.settled.has(id)) return false
    this.close(job.jid)
    return true
  }

  close(jid: string): void {
    if (!this.#jobs.delete(jid)) return
    void this.#append(line('close', jid))
  }

  /** Closes jobs older than the ttl; returns how many. */
  expire(now = Date.now()): number {
    let closed = 0
    for (const job of [...this.#jobs.values()]) {
      if (now - job.openedAt <= this.#o.ttlMs) continue
      this.close(job.jid)
      closed++
    }
    return closed
  }

  #bound(): void {
    const limit = this.#o.limit ?? 10_000
    while (this.#jobs.size > limit) {
      const oldest = this.#jobs.keys().next().value as string
      this.#logger.warning(`more than ${limit} jobs open for forwarding; no longer watching job ${oldest} (its late returns still go up as they come)`)
      this.close(oldest)
    }
  }

  #append(text: string): Promise<void> {
    const run = this.#writes.then(async () => {
      this.#handle ??= open(this.file, 'a', 0o600)
      const handle = await this.#handle
      await handle.write(`${text}\n`)
      await handle.datasync()
    })
    this.#writes = run.catch((error: unknown) => this.#logger.error(`cannot write the syndic's job journal ${this.file}: ${(error as Error).message}`))
    return this.#writes
  }

  /** Waits for journal writes and closes the file. */
  async closeJournal(): Promise<void> {
    await this.#writes
    const handle = await this.#handle?.catch(() => undefined)
    this.#handle = undefined
    await handle?.close()
  }
}

function blank(jid: string, master: string, openedAt: number, known: boolean): OpenJob {
  return { jid, master, openedAt, expected: new Set(), seen: new Set(), settled: new Set(), pendingSyndics: new Set(), known }
}

function line(op: 'open' | 'close', jid: string, master?: string, at?: number, minions?: readonly string[]): string {
  return JSON.stringify(op === 'open' ? { op, jid, master, at, minions } : { op, jid })
}
