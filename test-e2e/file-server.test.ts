import { createHash, randomBytes } from 'node:crypto'
import { createReadStream, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseInput } from '@brine/config'
import type { Fleet } from '@brine/harness'
import { FleetClients } from './helpers/clients.js'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'

/** The clients of each fleet a test started, made at its first call and closed before the fleets stop. */
const clients = new FleetClients()
const startFleet = useFleets(() => clients.close())

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
/**
 * Minion m1's return of the job `brine m1 <fun> <words…> -t 120` publishes (its words typed by the CLI's own
 * parse_input), as its `--out json --static` prints it: through a LocalClient, as host-modules runs its jobs (the
 * CLI's output has its own e2e files). A 50 MiB fetch takes a while on a loaded machine: bounds, not timings.
 */
const call = async (fleet: Fleet, [fun, ...words]: string[]): Promise<unknown> => {
  const returns = await clients.of(fleet).local.cmd('m1', fun!, parseInput(words), { timeout: 120_000 })
  return (JSON.parse(JSON.stringify(returns)) as Record<string, unknown>)['m1']
}
/** What `brine-run <fun> [key=value…] --out json` prints, through a RunnerClient. */
const runner = (fleet: Fleet, fun: string, kwarg: Record<string, unknown> = {}): Promise<unknown> => clients.runner(fleet, fun, [], kwarg)
const servedBytes = async (fleet: Fleet): Promise<number> => ((await runner(fleet, 'fileserver.stats')) as { bytes_served: number }).bytes_served
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

      // brine-call without --local: salt:// from the master, authenticated with the minion's own keys (Salt's salt-call).
      const fetched = join(scratch, `${transport}-called.sh`)
      const called = await fleet.run('brine-call', ['--out', 'json', 'cp.get_file', 'salt://scripts/hello.sh', fetched], {
        configDir: fleet.minionConfigDir('m1'),
      })
      expect([JSON.parse(called.stdout), called.code]).toEqual([{ local: fetched }, 0])
      expect(readFileSync(fetched, 'utf8')).toBe(readFileSync(join(srv, 'scripts/hello.sh'), 'utf8'))

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
    expect(await runner(fleet, 'fileserver.file_list')).toEqual(['big.bin', 'scripts/hello.sh'])
    expect(await runner(fleet, 'fileserver.dir_list', { saltenv: 'base' })).toEqual(['scripts'])
    expect(await runner(fleet, 'fileserver.envs')).toEqual(['base'])
    expect(await call(fleet, ['cp.list_master'])).toEqual(['big.bin', 'scripts/hello.sh'])
  })
})
