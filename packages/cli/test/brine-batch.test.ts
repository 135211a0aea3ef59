import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { BatchEvent, BatchOptions, CliReturn } from '@brine/client'
import type { Tgt } from '@brine/protocol'
import { parseBrineArgs, runBrine, type CliJob, type JobClient } from '../src/commands/brine.js'
import { EXIT_USAGE } from '../src/io.js'
import { memoryIO } from './helpers.js'

const J1 = '20260101000000000001'
const J2 = '20260101000000000002'
const J3 = '20260101000000000003'
const PING = '20260101000000000000'

const progress = (done: number, running: number, waiting: number) => ({ done, running, waiting })
const ok = (id: string, jid: string, ret: unknown = true, retcode = 0): BatchEvent => ({
  type: 'return',
  item: { id, status: 'returned', ret, retcode, success: retcode === 0, jid },
  progress: progress(0, 0, 0),
})

/** Three batches of one over a, b, c; d did not answer the ping; c returns `lastRetcode`. */
function threeBatches(lastRetcode = 0): BatchEvent[] {
  return [
    { type: 'ping', jid: PING, minions: ['a', 'b', 'c', 'd'], up: ['a', 'b', 'c'], down: ['d'], size: 1 },
    { type: 'batch', jid: J1, minions: ['a'], progress: progress(0, 1, 2) },
    { ...ok('a', J1), progress: progress(1, 0, 2) } as BatchEvent,
    { type: 'batch', jid: J2, minions: ['b'], progress: progress(1, 1, 1) },
    { ...ok('b', J2), progress: progress(2, 0, 1) } as BatchEvent,
    { type: 'batch', jid: J3, minions: ['c'], progress: progress(2, 1, 0) },
    { ...ok('c', J3, 'done', lastRetcode), progress: progress(3, 0, 0) } as BatchEvent,
  ]
}

interface Recorded {
  batches: Array<{ tgt: Tgt; fun: string; arg: readonly unknown[]; options: BatchOptions }>
  jobs: Array<{ tgt: Tgt; fun: string; closed: boolean }>
}

/** A client stand-in: cmdBatch yields `events`; runJob answers a test.ping probe with `matched` and any other job with returns from them. */
function batchClient(
  events: BatchEvent[],
  options: { matched?: string[]; config?: { batch_safe_limit: number; batch_safe_size: string } } = {},
): JobClient & Recorded {
  const matched = options.matched ?? []
  const recorded: Recorded = { batches: [], jobs: [] }
  return {
    ...recorded,
    async *cmdBatch(tgt, fun, arg, batchOptions) {
      recorded.batches.push({ tgt, fun, arg, options: batchOptions })
      yield* events
    },
    async runJob(tgt, fun): Promise<CliJob> {
      const record = { tgt, fun, closed: false }
      recorded.jobs.push(record)
      return {
        jid: J1,
        minions: matched,
        async *returns(): AsyncGenerator<CliReturn> {
          for (const id of matched) yield { id, status: 'returned', ret: true, retcode: 0, jid: J1 }
        },
        async close() {
          record.closed = true
        },
      }
    },
    async cmdAsync() {
      return J1
    },
    async subsetOf(_tgt, _fun, count) {
      return matched.slice(0, count)
    },
    async previewTarget() {
      throw new Error('a preview was not expected here')
    },
    async config() {
      return options.config ?? { batch_safe_limit: 0, batch_safe_size: '8' }
    },
    async close() {},
  }
}

describe('brine batch flags', () => {
  it("parses Salt's -b/--batch/--batch-size, --batch-wait in ms, --batch-safe-limit/-size and --failhard", () => {
    expect(parseBrineArgs(['-b', '2', '*', 'test.ping'], memoryIO())).toMatchObject({ batch: { size: '2', failhard: false } })
    expect(parseBrineArgs(['--batch', '%10', '*', 'test.ping'], memoryIO())).toMatchObject({ batch: { size: '%10' } })
    expect(parseBrineArgs(['--batch-size', '25%', '--batch-wait', '1.5', '--failhard', '*', 'test.ping'], memoryIO())).toMatchObject({
      batch: { size: '25%', wait: 1500, failhard: true },
    })
    expect(parseBrineArgs(['--batch-safe-limit', '100', '--batch-safe-size', '10%', '*', 'test.ping'], memoryIO())).toMatchObject({
      batch: { safeLimit: 100, safeSize: '10%' },
    })
    expect(parseBrineArgs(['*', 'test.ping'], memoryIO())).toMatchObject({ batch: { failhard: false } })
  })

  it('refuses a bad size, a bad wait and --async with --batch, as usage errors naming the flag', () => {
    const cases: Array<[string[], RegExp]> = [
      [['-b', '0', '*', 'test.ping'], /-b, --batch <size>.*'0'.*at least one minion.*percentage of them \(10%, or %10\)/s],
      [['--batch', 'lots', '*', 'test.ping'], /--batch <size>.*'lots'.*not a whole number/s],
      [['--batch-size', '0%', '*', 'test.ping'], /--batch-size <size>.*above 0%/s],
      [['--batch-safe-size', 'x%', '*', 'test.ping'], /--batch-safe-size <size>.*not a percentage/s],
      [['--batch-wait', 'soon', '-b', '1', '*', 'test.ping'], /--batch-wait <seconds>.*'soon'/s],
      [['--batch-safe-limit', 'many', '*', 'test.ping'], /--batch-safe-limit <n>.*must be an integer/s],
      [['-b', '1', '--async', '*', 'test.ping'], /--async cannot be combined with --batch/],
    ]
    for (const [argv, message] of cases) {
      const io = memoryIO()
      expect(parseBrineArgs(argv, io), argv.join(' ')).toBe(EXIT_USAGE)
      expect(io.err(), argv.join(' ')).toMatch(message)
    }
  })
})

describe('brine in batch mode', () => {
  it("prints Salt's lines: the silent minion, each batch, each return with its jid and retcode; exits with the highest retcode", async () => {
    const client = batchClient(threeBatches(3))
    const io = memoryIO()
    expect(await runBrine(['-b', '1', '-t', '2', '--return', 'syslog', '*', 'cmd.run', 'deploy'], io, { createClient: () => client })).toBe(3)
    expect(io.out()).toBe(
      [
        'Minion d did not respond. No job will be sent.',
        '',
        "Executing run on ['a']",
        '',
        'a:\n    True\njid:\n    20260101000000000001\nretcode:\n    0',
        '',
        "Executing run on ['b']",
        '',
        'b:\n    True\njid:\n    20260101000000000002\nretcode:\n    0',
        '',
        "Executing run on ['c']",
        '',
        'c:\n    done\njid:\n    20260101000000000003\nretcode:\n    3',
        '',
      ].join('\n'),
    )
    expect(io.err()).toBe('ERROR: Minions returned with non-zero exit code\n')
    expect(client.batches).toEqual([
      { tgt: '*', fun: 'cmd.run', arg: ['deploy'], options: { tgtType: 'glob', batch: '1', failhard: false, timeout: 2000, ret: 'syslog' } },
    ])
  })

  it('passes --metadata to the batch run', async () => {
    const client = batchClient(threeBatches(0))
    await runBrine(['-b', '1', '--metadata', '{ticket: 8}', '*', 'cmd.run', 'deploy'], memoryIO(), { createClient: () => client })
    expect(client.batches).toEqual([
      { tgt: '*', fun: 'cmd.run', arg: ['deploy'], options: { tgtType: 'glob', batch: '1', failhard: false, metadata: { ticket: 8 } } },
    ])
  })

  it('--out json: each return is a document carrying retcode and jid; a silent minion alone makes the exit 1', async () => {
    const io = memoryIO()
    expect(await runBrine(['-b', '50%', '--out', 'json', '-L', 'a,b,c,d', 'test.ping'], io, { createClient: () => batchClient(threeBatches()) })).toBe(1)
    expect(io.out()).toContain(`\nExecuting run on ['a']\n\n{\n    "retcode": 0,\n    "jid": "${J1}",\n    "a": true\n}\n`)
    const documents = io
      .out()
      .split(/^(?=\{)/m)
      .filter((part) => part.startsWith('{'))
      .map((part) => JSON.parse(part.slice(0, part.lastIndexOf('}') + 1)) as Record<string, unknown>)
    expect(documents).toEqual([
      { retcode: 0, jid: J1, a: true },
      { retcode: 0, jid: J2, b: true },
      { retcode: 0, jid: J3, c: 'done' },
    ])
    expect(io.err()).toBe('')
  })

  it('a retcode beyond an exit status (256) exits 255, not 0', async () => {
    const io = memoryIO()
    expect(await runBrine(['-b', '1', '--hide-timeout', '*', 'cmd.run', 'x'], io, { createClient: () => batchClient(threeBatches(256)) })).toBe(255)
  })

  it('--hide-timeout leaves the silent minion out, and the exit is then 0', async () => {
    const io = memoryIO()
    expect(await runBrine(['-b', '1', '--hide-timeout', '*', 'test.ping'], io, { createClient: () => batchClient(threeBatches()) })).toBe(0)
    expect(io.out()).not.toContain('did not respond')
  })

  it('reports a minion that did not return its batch job, and -v/--show-jid name each batch job', async () => {
    const events: BatchEvent[] = [
      { type: 'ping', jid: PING, minions: ['a'], up: ['a'], down: [], size: 1 },
      { type: 'batch', jid: J1, minions: ['a'], progress: progress(0, 1, 0) },
      { type: 'return', item: { id: 'a', status: 'missing', jid: J1 }, progress: progress(1, 0, 0) },
    ]
    const io = memoryIO()
    expect(await runBrine(['-b', '1', '-v', '--show-jid', '*', 'test.ping'], io, { createClient: () => batchClient(events) })).toBe(1)
    expect(io.out()).toBe(
      `\nExecuting run on ['a']\n\njid: ${J1}\nExecuting job with jid ${J1}\n-------------------------------------------\n\na:\n    Minion did not return. [No response]\n`,
    )
  })

  it('--failhard: says which minion stopped the run and what was never sent, and exits with its retcode', async () => {
    const events: BatchEvent[] = [
      ...threeBatches().slice(0, 4),
      { ...ok('b', J2, 'broken', 2), progress: progress(2, 0, 1) } as BatchEvent,
      { type: 'failhard', id: 'b', jid: J2, running: [], unsent: ['c'] },
    ]
    const client = batchClient(events)
    const io = memoryIO()
    expect(await runBrine(['-b', '1', '--failhard', '*', 'cmd.run', 'deploy'], io, { createClient: () => client })).toBe(2)
    expect(client.batches[0]?.options).toMatchObject({ failhard: true })
    expect(io.out()).not.toContain("Executing run on ['c']")
    expect(io.err()).toBe(
      "ERROR: Minion b returned with non-zero exit code. Batch run stopped due to failhard; not sent to ['c']\nERROR: Minions returned with non-zero exit code\n",
    )
  })

  it('--static prints one document at the end, without the batch lines', async () => {
    const io = memoryIO()
    expect(await runBrine(['-b', '2', '--static', '--out', 'json', '*', 'test.ping'], io, { createClient: () => batchClient(threeBatches()) })).toBe(1)
    expect(JSON.parse(io.out())).toEqual({ a: true, b: true, c: 'done', d: 'Minion did not return. [No response]' })
  })

  it('--out-file takes the returns and the --static document; the batch lines stay on stdout', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-batch-outfile-'))
    try {
      const path = join(dir, 'out.txt')
      const io = memoryIO()
      expect(await runBrine(['-b', '1', '--out-file', path, '*', 'test.ping'], io, { createClient: () => batchClient(threeBatches()) })).toBe(1)
      expect(io.out()).toBe(
        "Minion d did not respond. No job will be sent.\n\nExecuting run on ['a']\n\n\nExecuting run on ['b']\n\n\nExecuting run on ['c']\n\n",
      )
      expect(await readFile(path, 'utf8')).toBe(
        'a:\n    True\njid:\n    20260101000000000001\nretcode:\n    0\nb:\n    True\njid:\n    20260101000000000002\nretcode:\n    0\nc:\n    done\njid:\n    20260101000000000003\nretcode:\n    0\n',
      )
      const statics = memoryIO()
      expect(
        await runBrine(['-b', '2', '-s', '--out', 'json', '--out-file', path, '*', 'test.ping'], statics, { createClient: () => batchClient(threeBatches()) }),
      ).toBe(1)
      expect(statics.out()).toBe('')
      expect(JSON.parse(await readFile(path, 'utf8'))).toEqual({ a: true, b: true, c: 'done', d: 'Minion did not return. [No response]' })
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('--subset picks the minions first, then runs the batches over them as a list target', async () => {
    const client = batchClient(threeBatches(), { matched: ['a', 'b', 'c'] })
    expect(await runBrine(['--subset', '2', '-b', '1', '*', 'test.ping'], memoryIO(), { createClient: () => client })).toBe(1)
    expect(client.batches[0]).toMatchObject({ tgt: ['a', 'b'], fun: 'test.ping', options: { tgtType: 'list' } })
  })

  it('exits 2 when nothing matched', async () => {
    const io = memoryIO()
    const events: BatchEvent[] = [{ type: 'ping', jid: PING, minions: [], up: [], down: [], size: 1 }]
    expect(await runBrine(['-b', '1', 'nobody', 'test.ping'], io, { createClient: () => batchClient(events) })).toBe(2)
    expect(io.err()).toBe('No minions matched the target.\n')
  })

  it('draws a live done / running / waiting line on a terminal, never on stdout', async () => {
    const io = memoryIO({ stderrTTY: true })
    expect(await runBrine(['-b', '1', '*', 'test.ping'], io, { createClient: () => batchClient(threeBatches()) })).toBe(1)
    expect(io.err()).toContain('0/3 done, 1 running, 2 waiting')
    expect(io.err()).toContain('2/3 done, 0 running, 1 waiting')
    expect(io.err()).toContain('3/3 done, 0 running, 0 waiting')
    expect(io.out()).not.toContain('\x1b')
    expect(io.out()).toContain("Executing run on ['c']")
  })
})

describe('batch_safe_limit', () => {
  it("switches to batch mode with Salt's NOTICE when the target matches at least the limit, reusing the sizing ping", async () => {
    const client = batchClient(threeBatches(), { matched: ['a', 'b', 'c', 'd'], config: { batch_safe_limit: 4, batch_safe_size: '2' } })
    const io = memoryIO()
    expect(await runBrine(['*', 'test.ping'], io, { createClient: () => client })).toBe(1)
    expect(io.out()).toMatch(/^\nNOTICE: Too many minions targeted, switching to batch execution.\nMinion d did not respond/)
    expect(client.jobs).toEqual([{ tgt: '*', fun: 'test.ping', closed: false }])
    expect(client.batches[0]?.options).toMatchObject({ batch: '2' })
    expect(client.batches[0]?.options.ping?.minions).toEqual(['a', 'b', 'c', 'd'])
  })

  it('runs as usual below the limit (the sizing ping left unread), and the flags override the config', async () => {
    const below = batchClient([], { matched: ['a', 'b'], config: { batch_safe_limit: 3, batch_safe_size: '8' } })
    const io = memoryIO()
    expect(await runBrine(['*', 'test.ping'], io, { createClient: () => below })).toBe(0)
    expect(io.out()).toBe('a:\n    True\nb:\n    True\n')
    expect(below.jobs).toEqual([
      { tgt: '*', fun: 'test.ping', closed: true },
      { tgt: '*', fun: 'test.ping', closed: true },
    ])
    expect(below.batches).toEqual([])

    const flagged = batchClient(threeBatches(), { matched: ['a', 'b'], config: { batch_safe_limit: 0, batch_safe_size: '8' } })
    const flaggedIO = memoryIO()
    expect(await runBrine(['--batch-safe-limit', '2', '--batch-safe-size', '50%', '*', 'test.ping'], flaggedIO, { createClient: () => flagged })).toBe(1)
    expect(flaggedIO.out()).toContain('NOTICE: Too many minions targeted')
    expect(flagged.batches[0]?.options).toMatchObject({ batch: '50%' })

    // --static keeps stdout one document: the NOTICE goes to stderr.
    const quiet = batchClient(threeBatches(), { matched: ['a', 'b'], config: { batch_safe_limit: 2, batch_safe_size: '8' } })
    const quietIO = memoryIO()
    expect(await runBrine(['--static', '--out', 'json', '--hide-timeout', '*', 'test.ping'], quietIO, { createClient: () => quiet })).toBe(0)
    expect(JSON.parse(quietIO.out())).toEqual({ a: true, b: true, c: 'done' })
    expect(quietIO.err()).toContain('NOTICE: Too many minions targeted, switching to batch execution.')

    // A limit of 1 (or 0) is off, as in Salt.
    const off = batchClient([], { matched: ['a'], config: { batch_safe_limit: 1, batch_safe_size: '8' } })
    expect(await runBrine(['*', 'test.ping'], memoryIO(), { createClient: () => off })).toBe(0)
    expect(off.jobs).toHaveLength(1)
  })

  it('a bad batch_safe_size in the master config is an error naming the key', async () => {
    const client = batchClient([], { matched: ['a'], config: { batch_safe_limit: 2, batch_safe_size: 'lots' } })
    const io = memoryIO()
    expect(await runBrine(['*', 'test.ping'], io, { createClient: () => client })).toBe(1)
    expect(io.err()).toMatch(/^brine: invalid batch size "lots" for batch_safe_size: not a whole number/)
    expect(client.jobs).toEqual([])
  })
})
