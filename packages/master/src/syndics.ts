import { randomBytes } from 'node:crypto'
import { mkdir, readdir, readFile, rename, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { type Target } from '@brine/protocol'
import { expectedMinions, type Nodegroups } from '@brine/targeting'
import { isValidMinionId } from '@brine/crypt'
import { silentLogger, type Logger } from '@brine/core'

/** How long the registry waits to write a syndic's file after a change, so a burst of announcements is one write. */
const PERSIST_DELAY_MS = 200

/**
 * The syndics attached to this master and the minions each has announced, in memory and at
 * `<cachedir>/syndics/<id>` (JSON `{minions}`; Salt keeps an empty marker file there). The master uses
 * it to leave syndics out of the minions it expects (a syndic is not a minion that did not return), to
 * tell the client which syndics may announce for a job, and to name the minions behind a syndic that
 * never announces (dead), so they are reported rather than silently absent.
 */
export class SyndicRegistry {
  readonly dir: string
  readonly #logger: Logger
  readonly #minions = new Map<string, Set<string>>()
  /**
   * Each minion a syndic has answered for → that syndic: the pin. Another syndic claiming it is refused
   * until an operator moves it ({@link move}), so a compromised syndic can lie only about its own subtree.
   */
  readonly #owners = new Map<string, string>()
  readonly #dirty = new Set<string>()
  #timer: NodeJS.Timeout | undefined
  #writing: Promise<void> = Promise.resolve()

  constructor(cachedir: string, logger: Logger = silentLogger) {
    this.dir = join(cachedir, 'syndics')
    this.#logger = logger
  }

  /** Reads the registry written before; unreadable files are logged and skipped. */
  async load(): Promise<void> {
    let names: string[]
    try {
      names = await readdir(this.dir)
    } catch {
      return
    }
    for (const id of names.filter(isValidMinionId)) {
      try {
        const text = await readFile(join(this.dir, id), 'utf8')
        const value = text.trim() === '' ? {} : (JSON.parse(text) as { minions?: unknown })
        const minions = Array.isArray(value.minions) ? value.minions.filter((m): m is string => typeof m === 'string' && isValidMinionId(m)) : []
        this.#minions.set(id, new Set(minions.filter((minion) => this.#pinOnLoad(minion, id))))
      } catch (error) {
        this.#logger.warning(`syndic registry: cannot read ${join(this.dir, id)}: ${(error as Error).message}; skipped`)
      }
    }
  }

  /** Pins `minion` to `syndic` as the files are read; a minion two files name stays with the first (logged). */
  #pinOnLoad(minion: string, syndic: string): boolean {
    const owner = this.#owners.get(minion)
    if (owner === undefined) {
      this.#owners.set(minion, syndic)
      return true
    }
    this.#logger.warning(`syndic registry: minion ${minion} is listed for syndics ${owner} and ${syndic}; kept with ${owner} (brine-run syndics.move moves it)`)
    this.#schedule(syndic)
    return false
  }

  /** The syndic `minion` is pinned to, if any. */
  ownerOf(minion: string): string | undefined {
    return this.#owners.get(minion)
  }

  /**
   * Claims `minions` for `syndic`: each one already its own, or not yet any syndic's while it holds fewer than
   * `max` (`syndic_max_minions`), is pinned to it; the rest are refused with the reason. Synchronous, so no
   * two syndics can claim one minion between a check and the pin.
   */
  claim(syndic: string, minions: readonly string[], max: number): { claimed: string[]; refused: Array<{ id: string; reason: string }> } {
    this.register(syndic)
    const known = this.#minions.get(syndic)!
    const claimed: string[] = []
    const refused: Array<{ id: string; reason: string }> = []
    for (const minion of minions) {
      const owner = this.#owners.get(minion)
      if (owner === syndic) claimed.push(minion)
      else if (owner !== undefined)
        refused.push({
          id: minion,
          reason: `minion ${JSON.stringify(minion)} is pinned to syndic ${owner}, not ${syndic} (an operator moves it: brine-run syndics.move)`,
        })
      else if (known.size >= max) refused.push({ id: minion, reason: `syndic ${syndic} already answers for ${known.size} minions (syndic_max_minions ${max})` })
      else {
        known.add(minion)
        this.#owners.set(minion, syndic)
        claimed.push(minion)
      }
    }
    if (claimed.length > 0) this.#schedule(syndic)
    return { claimed, refused }
  }

  /**
   * The operator's move: pins each of `minions` to syndic `to` (registering it), wherever it was pinned
   * before. Returns, per minion, the syndic it was pinned to (undefined: none).
   */
  move(minions: readonly string[], to: string): Record<string, string | null> {
    this.register(to)
    const moved: Record<string, string | null> = {}
    for (const minion of minions) {
      const from = this.#owners.get(minion)
      moved[minion] = from ?? null
      if (from === to) continue
      if (from !== undefined) {
        this.#minions.get(from)?.delete(minion)
        this.#schedule(from)
      }
      this.#minions.get(to)!.add(minion)
      this.#owners.set(minion, to)
    }
    this.#schedule(to)
    return moved
  }

  isSyndic(id: string): boolean {
    return this.#minions.has(id)
  }

  /** The known syndics' ids. */
  ids(): string[] {
    return [...this.#minions.keys()]
  }

  /** Minions syndic `id` has announced so far. */
  minionsOf(id: string): readonly string[] {
    return [...(this.#minions.get(id) ?? [])]
  }

  /** Records `id` as a syndic; true the first time. */
  register(id: string): boolean {
    if (this.#minions.has(id)) return false
    this.#minions.set(id, new Set())
    this.#schedule(id)
    return true
  }

  /** Forgets syndic `id` (its key was deleted), and the pins of its minions. */
  forget(id: string): void {
    const minions = this.#minions.get(id)
    if (minions === undefined) return
    for (const minion of minions) if (this.#owners.get(minion) === id) this.#owners.delete(minion)
    this.#minions.delete(id)
    this.#dirty.delete(id)
    this.#writing = this.#writing.then(() => unlink(join(this.dir, id)).catch(() => {}))
  }

  /**
   * For each syndic in `syndics`: the minions it announced before that `target` may select by id
   * (greedy on grains, which the master does not know for them).
   */
  async candidates(target: Target, syndics: readonly string[], nodegroups?: Nodegroups): Promise<Record<string, string[]>> {
    const out: Record<string, string[]> = {}
    for (const syndic of syndics) {
      const minions = this.minionsOf(syndic)
      out[syndic] =
        minions.length === 0
          ? []
          : await expectedMinions(
              target,
              minions.map((id) => ({ id })),
              nodegroups,
            )
    }
    return out
  }

  #schedule(id: string): void {
    this.#dirty.add(id)
    if (this.#timer !== undefined) return
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      void this.flush()
    }, PERSIST_DELAY_MS)
    this.#timer.unref()
  }

  /** Writes every changed syndic's file (atomically: a temporary file, then rename). */
  flush(): Promise<void> {
    clearTimeout(this.#timer)
    this.#timer = undefined
    const ids = [...this.#dirty]
    this.#dirty.clear()
    this.#writing = this.#writing.then(async () => {
      if (ids.length === 0) return
      await mkdir(this.dir, { recursive: true, mode: 0o700 })
      for (const id of ids) {
        const minions = this.#minions.get(id)
        if (minions === undefined) continue
        const file = join(this.dir, id)
        const temp = `${file}.${randomBytes(4).toString('hex')}.tmp`
        try {
          await writeFile(temp, JSON.stringify({ minions: [...minions].sort() }), { mode: 0o600 })
          await rename(temp, file)
        } catch (error) {
          await unlink(temp).catch(() => {})
          this.#logger.warning(`syndic registry: cannot write ${file}: ${(error as Error).message}`)
        }
      }
    })
    return this.#writing
  }
}

/** What one syndic announced for one job. */
interface SyndicShare {
  minions: Set<string>
  pending: string[]
}

/**
 * Per job, which syndic announced which minions, bounded by the number of (job, minion) announcements
 * held (the oldest jobs are forgotten first). A syndic's return for a minion is accepted only if that
 * syndic announced that minion for that job; a forgotten job costs nothing, because every batch a syndic
 * sends announces the minions of the returns in it again.
 */
export class Announcements {
  readonly #jobs = new Map<string, Map<string, SyndicShare>>()
  readonly #limit: number
  #entries = 0

  constructor(limit = 1_000_000) {
    this.#limit = limit
  }

  /**
   * Records what `syndic` announced for `jid`: the minions not announced by it before, and whether its
   * pending syndics changed (or this is its first announcement for the job): either is worth an event.
   * `pending` undefined — a batch that only carries returns — leaves the pending syndics as they were
   * (none, on a first announcement): read as "none pending", a return that beat a lower syndic's
   * announcement up the tree would let the client stop waiting for that syndic's minions.
   * Returns the pending syndics now held.
   */
  announce(
    jid: string,
    syndic: string,
    minions: readonly string[],
    pending: readonly string[] | undefined,
  ): { fresh: string[]; changed: boolean; pending: readonly string[] } {
    let job = this.#jobs.get(jid)
    if (job === undefined) {
      job = new Map()
      this.#jobs.set(jid, job)
    }
    let share = job.get(syndic)
    const first = share === undefined
    if (share === undefined) {
      share = { minions: new Set(), pending: [] }
      job.set(syndic, share)
    }
    const fresh = minions.filter((id) => !share.minions.has(id))
    for (const id of fresh) share.minions.add(id)
    this.#entries += fresh.length
    const held = share.pending
    const changed = first || (pending !== undefined && (held.length !== pending.length || held.some((id, index) => id !== pending[index])))
    if (pending !== undefined) share.pending = [...pending]
    this.#bound(jid)
    return { fresh, changed, pending: share.pending }
  }

  announcedBy(jid: string, minion: string, syndic: string): boolean {
    return this.#jobs.get(jid)?.get(syndic)?.minions.has(minion) === true
  }

  /** Forgets the oldest jobs (never `keep`) until the announcements held fit the limit. */
  #bound(keep: string): void {
    for (const [jid, job] of this.#jobs) {
      if (this.#entries <= this.#limit) return
      if (jid === keep) continue
      for (const share of job.values()) this.#entries -= share.minions.size
      this.#jobs.delete(jid)
    }
  }
}
