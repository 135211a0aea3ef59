import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { decode, type Logger } from '@brine/core'
import { writeFileAtomic } from '@brine/crypt'
import type { ReturnLoad } from '@brine/protocol'
import { ReturnSpool, SPOOL_HELD_BYTES, spoolHeldBytes, type SpoolFileWriter } from '../src/spool.js'
import { SpoolFullError } from '../src/errors.js'

const returnLoad = (jid: string, value: unknown = true): ReturnLoad =>
  ({ cmd: '_return', id: 'm1', jid, fun: 'test.ping', fun_args: [], return: value, success: true, retcode: 0 }) as ReturnLoad

const jid = (n: number): string => `2026112700000000${String(n).padStart(4, '0')}`

/** A writer that fails with `code` while `failing(file)` says so, and writes atomically otherwise. */
function failingWriter(code: string, failing: (file: string) => boolean): { writeFile: SpoolFileWriter; failures: string[] } {
  const failures: string[] = []
  const writeFile: SpoolFileWriter = async (file, bytes, options) => {
    if (failing(file)) {
      failures.push(file)
      throw Object.assign(new Error(`${code}: simulated failure, write '${file}'`), { code })
    }
    await writeFileAtomic(file, bytes, options)
  }
  return { writeFile, failures }
}

/** A logger that keeps its warnings and errors. */
function recordingLogger(): { logger: Logger; warnings: string[] } {
  const warnings: string[] = []
  const keep = (message: string): void => void warnings.push(message)
  const logger = {
    error: keep,
    warning: keep,
    info: () => {},
    debug: () => {},
    trace: () => {},
    child: () => logger,
  } as unknown as Logger
  return { logger, warnings }
}

/** Polls `condition` every 20 ms; fails naming `what` after `ms`. */
async function until(condition: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await condition())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

describe('the return spool when a write fails', () => {
  let dir: string
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'brine-spool-fail-'))
  })
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it.each(['EIO', 'ENOSPC', 'EMFILE', 'ENFILE'])('keeps a return whose write fails with %s, in order, and writes it once the disk works', async (code) => {
    let broken = true
    const { writeFile, failures } = failingWriter(code, (file) => broken && file.endsWith(`${jid(2)}.msgpack`))
    const { logger, warnings } = recordingLogger()
    const spool = new ReturnSpool(dir, logger, writeFile)
    await spool.write(returnLoad(jid(1)))
    const heldFile = await spool.write(returnLoad(jid(2), 'held'))
    await spool.write(returnLoad(jid(3)))

    // Listed in its place between the two written before and after it, and readable from memory.
    expect((await spool.list()).map((file) => file.slice(dir.length + 1))).toEqual([1, 2, 3].map((n) => `${jid(n)}.msgpack`))
    expect((await spool.read(heldFile)).return).toBe('held')
    expect(spool.held).toBe(1)
    expect(spoolHeldBytes()).toBeGreaterThan(0)
    // A second spool object on the same directory (the minion's own, asking whether returns are owed) sees it too.
    expect(await new ReturnSpool(dir, logger).list()).toContain(heldFile)

    // Retried, and said once at warning with the path and the error.
    await until(() => failures.length >= 3, 'three failed tries')
    const said = warnings.filter((line) => line.includes(heldFile))
    expect(said).toHaveLength(1)
    expect(said[0]).toContain(code)

    broken = false
    await until(() => spool.held === 0, 'the held return to be written')
    expect(spoolHeldBytes()).toBe(0)
    expect((decode(await readFile(heldFile)) as ReturnLoad).return).toBe('held')
    expect((await readdir(dir)).sort()).toEqual([1, 2, 3].map((n) => `${jid(n)}.msgpack`))
  })

  it('delivers a held return from memory, and a retry still writing when it was removed leaves no file behind', async () => {
    let tries = 0
    let release: () => void = () => {}
    const released = new Promise<void>((resolve) => (release = resolve))
    let retryStarted = false
    let lateWriteDone = false
    const writeFile: SpoolFileWriter = async (file, bytes, options) => {
      if (++tries === 1) throw Object.assign(new Error(`EIO: simulated failure, write '${file}'`), { code: 'EIO' })
      retryStarted = true
      await released // the disk is slow: the flush delivers the return meanwhile
      await writeFileAtomic(file, bytes, options)
      lateWriteDone = true
    }
    const spool = new ReturnSpool(dir, recordingLogger().logger, writeFile)
    const file = await spool.write(returnLoad(jid(7)))
    expect(await spool.list()).toEqual([file])
    expect((await spool.read(file)).jid).toBe(jid(7))
    await until(() => retryStarted, 'the retry to start writing')
    await spool.remove(file)
    expect(spool.held).toBe(0)
    expect(await spool.list()).toEqual([])
    release()
    // Waits for the late write to have landed first: before it starts, the directory is empty too.
    await until(() => lateWriteDone, 'the late write to land')
    await until(async () => (await readdir(dir)).length === 0 && (await spool.list()).length === 0, 'the late write to be undone')
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(tries).toBe(2) // no retry left after it
    expect(await readdir(dir)).toEqual([])
  })

  it('a newer copy of a held return replaces it, and the older one is never written over it', async () => {
    let broken = true
    const { writeFile } = failingWriter('ENOSPC', () => broken)
    const spool = new ReturnSpool(dir, recordingLogger().logger, writeFile)
    const file = await spool.write(returnLoad(jid(8), 'old'))
    await spool.write(returnLoad(jid(8), 'new'))
    expect((await spool.read(file)).return).toBe('new')
    broken = false
    await until(() => spool.held === 0, 'the newer copy to be written')
    expect((decode(await readFile(file)) as ReturnLoad).return).toBe('new')
  })

  it('refuses with SpoolFullError, naming SPOOL_HELD_BYTES, a return that would hold more than it in memory', async () => {
    const { writeFile } = failingWriter('ENOSPC', () => true)
    const spool = new ReturnSpool(dir, recordingLogger().logger, writeFile)
    // Each return a little over a third of the bound: two are held, the third is over it.
    const big = 'x'.repeat(Math.ceil(SPOOL_HELD_BYTES / 3) + 1024)
    const files = [await spool.write(returnLoad(jid(1), big)), await spool.write(returnLoad(jid(2), big))]
    const refused = await spool.write(returnLoad(jid(3), big)).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(SpoolFullError)
    const error = refused as SpoolFullError
    expect(error.name).toBe('SpoolFullError')
    expect(error.limit).toBe(SPOOL_HELD_BYTES)
    expect(error.held).toBe(spoolHeldBytes())
    expect(error.message).toContain('SPOOL_HELD_BYTES')
    expect(error.message).toContain('ENOSPC')
    expect(error.message).toContain(`${jid(3)}.msgpack`)
    // The two held ones stay held; delivering them frees their bytes.
    expect(await spool.list()).toEqual(files)
    for (const file of files) await spool.remove(file)
    expect(spoolHeldBytes()).toBe(0)
  })
})
