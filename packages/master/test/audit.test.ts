import { readFileSync } from 'node:fs'
import { mkdir, mkdtemp, readdir, readFile, readlink, rename, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { defaultAuditLog } from '@brine/config'
import { silentLogger } from '@brine/core'
import { type BusEvent } from '@brine/protocol'
import { AuditLog, auditLogPath } from '../src/audit/audit-log.js'
import { maskSecrets, MASK } from '../src/audit/mask.js'
import { EventBus } from '../src/event-bus.js'
import { MinionEventGate } from '../src/minion-event-gate.js'
import { MinionEventRefusedError } from '@brine/protocol'

const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

describe('masking secrets', () => {
  it('masks values whose names say secret, in mappings and in key=value arguments, and bounds the rest', () => {
    expect(maskSecrets(['ls', 'password=hunter2', 'name=web', { api_key: 'k', nested: { Token: 't', ok: 1 } }])).toEqual([
      'ls',
      `password=${MASK}`,
      'name=web',
      { api_key: MASK, nested: { Token: MASK, ok: 1 } },
    ])
    const deep = maskSecrets({ a: { b: { c: { d: { e: { f: { g: { h: { i: 'x' } } } } } } } } }) as Record<string, unknown>
    expect(JSON.stringify(deep)).toContain(MASK)
    expect(String(maskSecrets('x'.repeat(5000)))).toMatch(/… \(5000 characters\)$/)
  })
})

describe('the audit log', () => {
  it('appends one JSON line per call, fires it as brine/audit/<cmd>, follows a rotated file, and answers queries', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-audit-'))
    const bus = new EventBus({ sockDir: join(dir, 'sock') })
    cleanups.push(
      () => rm(dir, { recursive: true, force: true }),
      () => bus.close(),
    )
    const fired: BusEvent[] = []
    bus.subscribe((event) => void fired.push(event))
    const audit = new AuditLog(join(dir, 'log', 'audit'), { bus })
    const alice = { user: 'alice', auth: 'eauth' as const, eauth: 'file', permissions: [], via: { client: 'api', address: '10.0.0.9' } }
    audit.record(alice, {
      cmd: 'publish',
      fun: 'cmd.run',
      tgt: 'web1',
      tgt_type: 'glob',
      arg: ['password=hunter2'],
      kwarg: {},
      result: 'refused',
      reason: 'no',
    })
    await audit.settle()
    await rename(audit.path, `${audit.path}.1`) // logrotate moves it away
    audit.record(
      { user: 'root', auth: 'key', permissions: 'all' },
      { cmd: 'runner', fun: 'jobs.list_jobs', arg: [], kwarg: {}, jid: '20261126000000000001', result: 'accepted' },
    )
    await audit.settle()
    const rotated = JSON.parse((await readFile(`${audit.path}.1`, 'utf8')).trim()) as Record<string, unknown>
    expect(rotated).toMatchObject({
      cmd: 'publish',
      user: 'alice',
      auth: 'eauth',
      eauth: 'file',
      via: { client: 'api', address: '10.0.0.9' },
      arg: [`password=${MASK}`],
      result: 'refused',
    })
    expect(await audit.query()).toEqual([expect.objectContaining({ cmd: 'runner', user: 'root', via: { client: 'library' }, jid: '20261126000000000001' })])
    expect(fired.map((event) => event.tag)).toEqual(['brine/audit/publish', 'brine/audit/runner'])
    expect(await audit.query({ user: 'alice' })).toEqual([])
  })

  it('keeps one handle on the file while the path names it, opens the path again once the file is gone, and holds none after close()', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-audit-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const audit = new AuditLog(join(dir, 'audit'))
    cleanups.push(() => audit.close())
    const root = { user: 'root', auth: 'key' as const, permissions: 'all' as const }
    const call = (fun: string) => ({ cmd: 'runner' as const, fun, arg: [], kwarg: {}, result: 'accepted' as const })
    /** This process's descriptors open on the audit file (by path; a deleted file's link says so). */
    const handlesOnIt = async (): Promise<string[]> => {
      const links = await Promise.all((await readdir('/proc/self/fd')).map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => '')))
      return links.filter((link) => link.startsWith(audit.path))
    }
    for (let index = 0; index < 5; index++) {
      audit.record(root, call(`test.f${index}`))
      await audit.settle()
    }
    expect(await handlesOnIt()).toEqual([audit.path])
    await rm(audit.path)
    audit.record(root, call('after.removal'))
    await audit.settle()
    expect((await audit.query()).map((record) => record.fun)).toEqual(['after.removal'])
    expect(await handlesOnIt()).toEqual([audit.path])
    await audit.close()
    expect(await handlesOnIt()).toEqual([])
    // A line recorded after close() is still written, and leaves no handle behind.
    audit.record(root, call('late'))
    await audit.settle()
    expect((await audit.query()).map((record) => record.fun)).toEqual(['after.removal', 'late'])
    expect(await handlesOnIt()).toEqual([])
  })

  it('has the calls of one turn in the file by the end of that turn, without waiting on settle(); a failed write is logged and the log goes on', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-audit-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const errors: string[] = []
    const logger = { ...silentLogger, error: (message: string) => void errors.push(message) }
    const audit = new AuditLog(join(dir, 'audit'), { logger })
    cleanups.push(() => audit.close())
    const root = { user: 'root', auth: 'key' as const, permissions: 'all' as const }
    const call = (fun: string) => ({ cmd: 'runner' as const, fun, arg: [], kwarg: {}, result: 'accepted' as const })
    audit.record(root, call('test.one'))
    audit.record(root, call('test.two'))
    expect(readFileSync(audit.path, 'utf8')).toBe('')
    await new Promise((resolve) => setImmediate(resolve))
    const lines = readFileSync(audit.path, 'utf8').trim().split('\n')
    expect(lines.map((line) => (JSON.parse(line) as { fun: string }).fun)).toEqual(['test.one', 'test.two'])
    // The path now names a directory: the append fails, is logged, and the next call after the path is a file again is written.
    await rm(audit.path)
    await mkdir(audit.path)
    audit.record(root, call('test.lost'))
    await audit.settle()
    expect(errors).toEqual([expect.stringMatching(/audit_log .*audit: could not write 1 record\(s\)/)])
    await rm(audit.path, { recursive: true })
    audit.record(root, call('test.three'))
    await audit.settle()
    expect((await audit.query()).map((record) => record.fun)).toEqual(['test.three'])
  })

  it("defaults to `audit` beside the daemon's log file, and under cachedir for a Master without a loaded config", () => {
    expect(defaultAuditLog({ log_file: '/var/log/brine/master' })).toBe('/var/log/brine/audit')
    expect(defaultAuditLog({ log_file: 'udp://syslog:514', root_dir: '/r' })).toBe('/r/var/log/brine/audit')
    expect(auditLogPath({ audit_log: '/srv/audit.jsonl', cachedir: '/c' })).toBe('/srv/audit.jsonl')
    expect(auditLogPath({ audit_log: '', cachedir: '/c' })).toBe('/c/audit')
  })
})

describe("the bounds on minions' events", () => {
  it('refuses an event larger than max bytes and a minion past its rate, each minion on its own', () => {
    let now = 0
    const gate = new MinionEventGate({ maxBytes: 1024, ratePerSecond: 2, burst: 3, now: () => now })
    const small = { tag: 'salt/minion/web1/x', data: { ok: true } }
    expect(() => gate.admit('web1', [{ tag: 'salt/minion/web1/big', data: { blob: 'x'.repeat(2000) } }])).toThrow(/minion_event_max_bytes \(1024\)/)
    gate.admit('web1', [small, small, small])
    expect(() => gate.admit('web1', [small])).toThrow(MinionEventRefusedError)
    gate.admit('web2', [small]) // web2 has its own bucket
    now += 1000 // two more events earned
    gate.admit('web1', [small, small])
    expect(() => gate.admit('web1', [small])).toThrow(/minion_event_rate \(2\/s, burst 3\)/)
  })
})
