import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { RunnerResult } from '@brine/client'
import { Master, rootCaller } from '@brine/master'
import { loadConfig } from '@brine/config'
import { deadline } from '@brine/transport-compliance'
import { freeLoopbackPort } from '@brine/testkit'
import { parseRunnerArguments, runRun, type RunnerLike } from '../src/commands/run.js'
import { runKey } from '../src/commands/key.js'
import type { CommandIO } from '../src/io.js'
import { memoryIO } from './helpers.js'

const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {})
})

/** A runner stand-in that records calls and answers `result`. */
function fakeRunner(result: Partial<RunnerResult>): RunnerLike & { calls: unknown[][] } {
  const runner = {
    calls: [] as unknown[][],
    async cmdFull(fun: string, arg: readonly unknown[] = [], kwarg: Record<string, unknown> = {}) {
      runner.calls.push([fun, arg, kwarg])
      return { jid: '20260101000000000001', return: null, success: true, ...result }
    },
    async close() {},
  }
  return runner
}

/** A real master in-process (tcp, worker_threads 0) and the config dir a CLI reads it from. */
async function realMaster(): Promise<{ master: Master; configDir: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'br-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const yaml = [
    'transport: tcp',
    'interface: 127.0.0.1',
    `publish_port: ${await freeLoopbackPort()}`,
    `ret_port: ${await freeLoopbackPort()}`,
    `pki_dir: ${join(dir, 'pki')}`,
    `cachedir: ${join(dir, 'cache')}`,
    `sock_dir: ${join(dir, 's')}`,
    'worker_threads: 0',
    'timeout: 1',
    // manage.* asks a silent minion find_job too (Salt's gather_job_timeout): keep that round short.
    'gather_job_timeout: 1',
  ].join('\n')
  await writeFile(join(dir, 'master'), `${yaml}\n`)
  const master = new Master((await loadConfig('master', { configDir: dir })).opts)
  cleanups.push(() => master.stop())
  await master.start()
  return { master, configDir: dir }
}

/** A CommandIO whose stderr resolves `ready` once `marker` was written. */
function watchedIO(marker: RegExp): { io: CommandIO & { out: () => string; err: () => string }; ready: Promise<void> } {
  const io = memoryIO()
  let resolve: () => void = () => {}
  const ready = new Promise<void>((done) => (resolve = done))
  const write = io.stderr.write.bind(io.stderr)
  io.stderr = { isTTY: false, write: (text: string) => (write(text), marker.test(io.err()) && resolve()) }
  return { io, ready }
}

describe('brine-run', () => {
  it('parses Salt-style arguments: key=value typed by yamlify, jids kept exact', () => {
    expect(parseRunnerArguments(['20261122170903123456', 'missing=True', 'timeout=2', 'search_target=web*', 'jid=20261122170903123456'])).toEqual({
      arg: ['20261122170903123456'],
      kwarg: { missing: true, timeout: 2, search_target: 'web*', jid: '20261122170903123456' },
    })
  })

  it('prints the return nested (default) or with --out; -t becomes the timeout; exit 1 when the runner failed', async () => {
    const runner = fakeRunner({ return: { web1: true, db1: 'Minion did not return' } })
    const io = memoryIO()
    expect(await runRun(['jobs.lookup_jid', '20261122170903123456', 'missing=True', '-t', '3'], io, { createRunner: () => runner })).toBe(0)
    expect(runner.calls).toEqual([['jobs.lookup_jid', ['20261122170903123456'], { missing: true, timeout: 3 }]])
    expect(io.out()).toBe('db1:\n    Minion did not return\nweb1:\n    True\n')
    const json = memoryIO()
    expect(await runRun(['manage.up', '--out', 'json'], json, { createRunner: () => fakeRunner({ return: ['web1', 'web2'] }) })).toBe(0)
    expect(json.out()).toBe('[\n    "web1",\n    "web2"\n]\n')
    // A minion's outputter hint travels as {outputter, data}: the data is printed with it.
    const hinted = memoryIO()
    expect(await runRun(['jobs.lookup_jid', '1'], hinted, { createRunner: () => fakeRunner({ return: { outputter: 'json', data: { web1: 1 } } }) })).toBe(0)
    expect(hinted.out()).toBe('{\n    "web1": 1\n}\n')
    const failed = memoryIO()
    expect(
      await runRun(['jobs.lookup_jid'], failed, {
        createRunner: () => fakeRunner({ success: false, return: 'Exception occurred in runner jobs.lookup_jid: boom' }),
      }),
    ).toBe(1)
    expect(failed.out()).toBe('Exception occurred in runner jobs.lookup_jid: boom\n')
    const usage = memoryIO()
    expect(await runRun(['nodot'], usage, { createRunner: () => fakeRunner({}) })).toBe(64)
    expect(usage.err()).toMatch(/'nodot' is not a runner name/)
  })

  it('--out-file writes the return to the file (emptied first, or appended to), without colour; an unopenable file is a usage error', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-run-outfile-'))
    try {
      const path = join(dir, 'out.txt')
      await writeFile(path, 'old\n')
      const io = memoryIO({ tty: true })
      expect(await runRun(['manage.up', '--out-file', path], io, { createRunner: () => fakeRunner({ return: ['web1'] }) })).toBe(0)
      expect(io.out()).toBe('')
      expect(await readFile(path, 'utf8')).toBe('- web1\n')
      expect(
        await runRun(['manage.up', '--output-file', path, '--out-file-append', '--out', 'json'], memoryIO(), {
          createRunner: () => fakeRunner({ return: [] }),
        }),
      ).toBe(0)
      expect(await readFile(path, 'utf8')).toBe('- web1\n[]\n')
      const runner = fakeRunner({ return: [] })
      const refused = memoryIO()
      expect(await runRun(['manage.up', '--out-file', join(dir, 'no', 'f')], refused, { createRunner: () => runner })).toBe(64)
      expect(refused.err()).toMatch(/brine-run: --out-file: cannot open .*no\/f: ENOENT/)
      expect(runner.calls).toEqual([])
      const alone = memoryIO()
      expect(await runRun(['manage.up', '--out-file-append'], alone, { createRunner: () => runner })).toBe(64)
      expect(alone.err()).toMatch(/--out-file-append needs --out-file/)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('against a real master: brine-key lists through WheelClient, brine-run runs, event.listen prints events as JSON lines', async () => {
    const { master, configDir } = await realMaster()
    await master.service.wheel(rootCaller(), { fun: 'key.gen_accept', id_: 'web1' })
    const keys = memoryIO()
    expect(await runKey(['-c', configDir, '-L'], keys)).toBe(0)
    expect(keys.out()).toBe('Accepted Keys:\nweb1\nDenied Keys:\nUnaccepted Keys:\nRejected Keys:\n')

    const { io, ready } = watchedIO(/listening for events/)
    const listening = runRun(['-c', configDir, '-l', 'info', 'event.listen', 'salt/run/*', 'count=2', '--out', 'json'], io)
    await deadline(ready, 10_000, 'event.listen to subscribe')
    const status = memoryIO()
    // web1 has no live minion behind it: with -t 0 it is down once find_job (gather_job_timeout) finds nothing.
    expect(await runRun(['-c', configDir, 'manage.status', '-t', '0', '--out', 'json', '--out-indent', '-1'], status)).toBe(0)
    expect(status.out()).toBe('{"up": [], "down": ["web1"]}\n')
    expect(await deadline(listening, 10_000, 'event.listen to print two events')).toBe(0)
    const lines = io
      .out()
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as { tag: string; data: Record<string, unknown> })
    expect(lines.map((line) => line.tag)).toEqual([expect.stringMatching(/^salt\/run\/\d{20}\/new$/), expect.stringMatching(/^salt\/run\/\d{20}\/ret$/)])
    expect(lines[1]!.data).toMatchObject({ fun: 'runner.manage.status', return: { up: [], down: ['web1'] }, success: true })

    // salt-run's progress: each event as {suffix, event} through the outputter, in order, then the return.
    const stream = memoryIO()
    expect(await runRun(['-c', configDir, 'test.stream', '--out', 'json', '--out-indent', '-1'], stream)).toBe(0)
    const streamed = stream
      .out()
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as { suffix?: string; event?: { message?: string } } | boolean)
    expect(streamed.slice(0, 99)).toEqual(
      Array.from({ length: 99 }, (_, index) => ({ suffix: 'progress', event: { message: `Runner is ${index + 1}% done`, _stamp: expect.any(String) } })),
    )
    expect(streamed.slice(99)).toEqual([true])

    // Pretty form: `<tag>\t<json>`; Ctrl-C (the signal) ends it with exit 0.
    const controller = new AbortController()
    const pretty = watchedIO(/listening for events/)
    pretty.io.signal = controller.signal
    const prettyRun = runRun(['-c', configDir, '-l', 'info', 'event.listen', 'salt/key', '--match-type', 'startswith'], pretty.io)
    await deadline(pretty.ready, 10_000, 'event.listen (pretty) to subscribe')
    master.bus.fire('salt/key', { act: 'delete', id: 'web1', result: true })
    master.bus.fire('salt/auth', { act: 'pend', id: 'x', result: true })
    master.bus.fire('salt/key', { act: 'accept', id: 'web2', result: true })
    const two = async (): Promise<void> => {
      while (pretty.io.out().split('\n').length < 3) await new Promise((resolve) => setImmediate(resolve))
    }
    await deadline(two(), 10_000, 'two salt/key events printed')
    controller.abort()
    expect(await deadline(prettyRun, 10_000, 'event.listen to stop on the signal')).toBe(0)
    expect(pretty.io.out()).toMatch(
      /^salt\/key\t\{"act": "delete", "id": "web1", "result": true, "_stamp": "[^"]+"\}\nsalt\/key\t\{"act": "accept", "id": "web2", /,
    )
  })

  it('runs a runner without progress lines when the bus cannot be reached', async () => {
    const runner = fakeRunner({ return: true })
    let followed = 0
    const io = memoryIO()
    const withFollow: RunnerLike = {
      ...runner,
      cmdFull: runner.cmdFull.bind(runner),
      async cmdFollowed() {
        followed++
        return { jid: '20260101000000000001', return: false, success: true }
      },
    }
    const unreachable = async (): Promise<never> => {
      throw new Error('no bus here')
    }
    expect(await runRun(['test.stream'], io, { createRunner: () => withFollow, createEvents: unreachable })).toBe(0)
    expect([followed, runner.calls]).toEqual([0, [['test.stream', [], {}]]])
    expect(io.out()).toBe('True\n')
  })

  it('says clearly when the event bus cannot be reached (exit 1)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'br-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    await writeFile(join(dir, 'master'), `sock_dir: ${join(dir, 'nobus')}\n`)
    const io = memoryIO()
    expect(await runRun(['-c', dir, 'event.listen'], io)).toBe(1)
    expect(io.err()).toMatch(/^brine-run: cannot reach the master's event bus at .*nobus\/master_event_pub\.ipc: .*Is brine-master running/)
  })
})
