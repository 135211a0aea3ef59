import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import type { Grains } from '@brine/common'
import { isValidMinionId, validateMinionId } from '@brine/crypt'
import { silentLogger, type Logger } from '@brine/transport'

/**
 * Minions' grains as they last reported them (`_grains`), in memory and at
 * `<cachedir>/minions/<id>/grains` (JSON), so grain targeting still knows them after a restart.
 */
export class GrainsCache {
  readonly dir: string
  readonly #grains = new Map<string, Grains>()
  readonly #logger: Logger

  constructor(cachedir: string, logger: Logger = silentLogger) {
    this.dir = join(cachedir, 'minions')
    this.#logger = logger
  }

  /** Reads every cached grains file; unreadable ones are logged and skipped. */
  async load(): Promise<void> {
    let names: string[]
    try {
      names = await readdir(this.dir)
    } catch {
      return
    }
    for (const id of names) {
      if (!isValidMinionId(id)) continue
      const file = join(this.dir, id, 'grains')
      try {
        const value: unknown = JSON.parse(await readFile(file, 'utf8'))
        if (typeof value === 'object' && value !== null && !Array.isArray(value)) this.#grains.set(id, value as Grains)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.#logger.warning(`ignoring grains cache ${file}: ${String(error)}`)
      }
    }
  }

  get(id: string): Grains | undefined {
    return this.#grains.get(id)
  }

  /** Caches `grains` for `id` (validated before it becomes a path), written atomically. */
  async set(id: string, grains: Grains): Promise<void> {
    validateMinionId(id)
    this.#grains.set(id, grains)
    const dir = join(this.dir, id)
    await mkdir(dir, { recursive: true, mode: 0o700 })
    const temp = join(dir, `.grains.${randomBytes(6).toString('hex')}.tmp`)
    await writeFile(temp, JSON.stringify(grains), { mode: 0o600 })
    await rename(temp, join(dir, 'grains'))
  }

  delete(id: string): void {
    this.#grains.delete(id)
  }
}
