import { createHash, randomBytes } from 'node:crypto'
import { createReadStream, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Fleet } from '@brine/harness'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'
import { json } from './helpers/output.js'

const startFleet = useFleets()

/** 50 MiB, as the acceptance asks: 200 chunks of file_buffer_size (256 KiB) over the sealed channel. */
const BIG_BYTES = 50 * 1024 * 1024
const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'brine-e2e-files-')))
const srv = join(scratch, 'srv')
let bigHash = ''

const sha256 = async (path: string): Promise<string> => {
  const hash = createHash('sha256')
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer)
  return hash.digest('hex')
}

beforeAll(async () => {
  mkdirSync(join(srv, 'scripts'), { recursive: true })
  const big = join(srv, 'big.bin')
  const hash = createHash('sha256')
  // Written a mebibyte at a time: the test never holds 50 MiB in memory.
  for (let written = 0; written < BIG_BYTES; written += 1 << 20) {
    const chunk = randomBytes(1 << 20)
    hash.update(chunk)
    writeFileSync(big, chunk, { flag: written === 0 ? 'w' : 'a' })
  }
  bigHash = hash.digest('hex')
  writeFileSync(join(srv, 'scripts/hello.sh'), '#!/bin/sh\necho "hello $1 $2 ($#)"\n')
  writeFileSync(join(scratch, 'secret.txt'), 'outside the roots')
  symlinkSync(join(scratch, 'secret.txt'), join(srv, 'escape.txt'))
})
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const masterConfig = (extra: Record<string, unknown> = {}) => ({ file_roots: { base: [srv] }, ...extra })
/** A brine call answered by minion m1 (a 50 MiB fetch takes a while on a loaded machine: bounds, not timings). */
const call = async (fleet: Fleet, args: string[]): Promise<unknown> => {
  const result = await fleet.run('brine', ['m1', ...args, '--out', 'json', '--static', '-t', '120'], { ms: 240_000 })
  return (json(result.stdout) as Record<string, unknown>)['m1']
}
const servedBytes = async (fleet: Fleet): Promise<number> => {
  const stats = await fleet.run('brine-run', ['fileserver.stats', '--out', 'json'])
  return (json(stats.stdout) as { bytes_served: number }).bytes_served
}
const masterCache = (fleet: Fleet): string => join(fleet.masterConfigDir, 'var/cache/brine/master')

describe.each(TRANSPORTS)('the file server over %s', (transport) => {
  it(
    'cp.get_file of 50 MiB arrives intact, a second call transfers nothing; escapes are refused; cmd.script runs; cp.push needs file_recv',
    { timeout: 600_000 },
    async () => {
      const fleet = await startFleet({ minions: [{ id: 'm1', transport }], masterConfig: masterConfig() })
      const dest = join(scratch, `${transport}-big.bin`)
      expect(await call(fleet, ['cp.get_file', 'salt://big.bin', dest])).toBe(dest)
      expect(await sha256(dest)).toBe(bigHash)
      const served = await servedBytes(fleet)
      expect(served).toBe(BIG_BYTES)
      const inode = statSync(dest).ino

      // The minion's copy has the master's hash: nothing crosses the wire, the file is not rewritten.
      expect(await call(fleet, ['cp.get_file', 'salt://big.bin', dest])).toBe(dest)
      expect(await servedBytes(fleet)).toBe(served)
      expect(statSync(dest).ino).toBe(inode)

      const escaped = join(scratch, `${transport}-escaped`)
      expect(await call(fleet, ['cp.get_file', 'salt://../etc/passwd', escaped])).toMatch(
        /^ERROR: FileServerPathError: file server path "\.\.\/etc\/passwd" \(saltenv base\) refused: '\.\.' leads out of the file roots/,
      )
      expect(await call(fleet, ['cp.get_file', 'salt://escape.txt', escaped])).toMatch(/^ERROR: FileServerPathError: .*a symlink leads out of the file roots/)
      expect(existsSync(escaped)).toBe(false)

      expect(await call(fleet, ['cmd.script', 'salt://scripts/hello.sh', 'a b'])).toEqual({
        pid: expect.any(Number),
        retcode: 0,
        stdout: 'hello a b (2)',
        stderr: '',
      })

      const source = join(scratch, `${transport}-push.txt`)
      writeFileSync(source, 'from the minion')
      expect(await call(fleet, ['cp.push', source])).toBe(false)
      expect(existsSync(join(masterCache(fleet), 'minions/m1/files'))).toBe(false)
    },
  )

  it('cp.push is stored under cachedir/minions/<id>/files with file_recv, up to file_recv_max_size', { timeout: 120_000 }, async () => {
    const fleet = await startFleet({ minions: [{ id: 'm1', transport }], masterConfig: masterConfig({ file_recv: true, file_recv_max_size: 1 }) })
    const source = join(scratch, `${transport}-pushed.txt`)
    writeFileSync(source, 'from the minion')
    expect(await call(fleet, ['cp.push', source])).toBe(true)
    expect(readFileSync(join(masterCache(fleet), 'minions/m1/files', source), 'utf8')).toBe('from the minion')
    const large = join(scratch, `${transport}-large.bin`)
    writeFileSync(large, randomBytes(2 * 1024 * 1024))
    expect(await call(fleet, ['cp.push', large])).toBe(false)
    expect(existsSync(join(masterCache(fleet), 'minions/m1/files', large))).toBe(false)

    // The fileserver runners read the same roots (the escaping symlink is not listed).
    const runner = async (args: string[]): Promise<unknown> => json((await fleet.run('brine-run', [...args, '--out', 'json'])).stdout)
    expect(await runner(['fileserver.file_list'])).toEqual(['big.bin', 'scripts/hello.sh'])
    expect(await runner(['fileserver.dir_list', 'saltenv=base'])).toEqual(['scripts'])
    expect(await runner(['fileserver.envs'])).toEqual(['base'])
    expect(await call(fleet, ['cp.list_master'])).toEqual(['big.bin', 'scripts/hello.sh'])
  })
})
