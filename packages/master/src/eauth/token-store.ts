import { randomBytes } from 'node:crypto'
import { mkdir, readdir, readFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { createFileExclusive, isNotFound, KEY_FILE_MODE, PKI_DIR_MODE } from '@brine/crypt'
import type { TokenData } from '@brine/protocol'
import { silentLogger, type Logger } from '@brine/core'
import { msFromSeconds } from '@brine/config'

export type { TokenData }

/** Salt's tokens are hex digests; only such names ever touch the token directory. */
const TOKEN_PATTERN = /^[0-9a-f]{32,128}$/

export const isTokenName = (value: unknown): value is string => typeof value === 'string' && TOKEN_PATTERN.test(value)

/**
 * The master's eauth tokens, one file per token under `token_dir` (Salt's `eauth_tokens: localfs`):
 * 64 random hex characters, mode 0600 in a 0700 directory, created exclusively (never overwritten).
 * A token that expired, or whose file is unreadable, is removed when it is next looked up.
 */
export class TokenStore {
  readonly dir: string
  readonly #logger: Logger

  constructor(dir: string, logger: Logger = silentLogger) {
    this.dir = dir
    this.#logger = logger
  }

  /** Makes a token for `data` (user, backend, lifetime) and returns it with its name. */
  async create(data: Omit<TokenData, 'token'>): Promise<TokenData> {
    await mkdir(this.dir, { recursive: true, mode: PKI_DIR_MODE })
    for (;;) {
      const token = randomBytes(32).toString('hex')
      const record: TokenData = { ...data, token }
      if (await createFileExclusive(join(this.dir, token), JSON.stringify(record), { mode: KEY_FILE_MODE })) return record
    }
  }

  /** The live token named `token`; undefined when unknown, malformed or expired (an expired one is removed). */
  async get(token: unknown, now: number = Date.now()): Promise<TokenData | undefined> {
    if (!isTokenName(token)) return undefined
    let record: TokenData
    try {
      record = JSON.parse(await readFile(join(this.dir, token), 'utf8')) as TokenData
    } catch (error) {
      if (isNotFound(error)) return undefined
      this.#logger.warning(`eauth token ${token.slice(0, 8)}…: unreadable token file removed (${(error as Error).message})`)
      await this.remove(token)
      return undefined
    }
    if (
      typeof record !== 'object' ||
      record === null ||
      typeof record.expire !== 'number' ||
      msFromSeconds(record.expire) <= now ||
      typeof record.name !== 'string'
    ) {
      await this.remove(token)
      return undefined
    }
    return record
  }

  /** Removes `token`; true when it existed. */
  async remove(token: unknown): Promise<boolean> {
    if (!isTokenName(token)) return false
    try {
      await rm(join(this.dir, token))
      return true
    } catch (error) {
      if (isNotFound(error)) return false
      throw error
    }
  }

  /** Removes every expired token; returns how many. */
  async prune(now: number = Date.now()): Promise<number> {
    let names: string[]
    try {
      names = await readdir(this.dir)
    } catch (error) {
      if (isNotFound(error)) return 0
      throw error
    }
    let removed = 0
    for (const name of names.filter(isTokenName)) {
      const before = await this.#exists(name)
      if (before && (await this.get(name, now)) === undefined) removed++
    }
    return removed
  }

  async #exists(name: string): Promise<boolean> {
    try {
      await readFile(join(this.dir, name))
      return true
    } catch {
      return false
    }
  }
}
