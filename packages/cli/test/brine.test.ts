import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { CliReturn } from '@brine/client'
import { parseBrineArgs, runBrine, type JobClient } from '../src/commands/brine.js'
import { memoryIO } from './helpers.js'

const JID = '20260101000000000001'

/** A LocalClient stand-in: answers the publish with `minions` and yields `returns`; `--subset` picks the first `count` of `having`. */
function fakeClient(
  minions: string[],
  returns: CliReturn[],
  missing: string[] = [],
  having: string[] = [],
): JobClient & { calls: unknown[][]; subsets: unknown[][]; previews: unknown[][]; closed: boolean } {
  const client = {
    calls: [] as unknown[][],
    subsets: [] as unknown[][],
    previews: [] as unknown[][],
    closed: false,
    async previewTarget(...args: unknown[]) {
      client.previews.push(args)
      return minions
    },
    async subsetOf(...args: unknown[]) {
      client.subsets.push(args)
      return having.slice(0, args[2] as number)
    },
    async runJob(...args: unknown[]) {
      client.calls.push(args)
      return {
        jid: minions.length === 0 ? '' : JID,
        minions,
        missing,
        async *returns() {
          yield* returns
        },
        async close() {},
      }
    },
    async cmdAsync(...args: unknown[]) {
      client.calls.push(args)
      return minions.length === 0 ? '' : JID
    },
    // Batch mode has its own tests (brine-batch.test.ts); here it stays off.
    async *cmdBatch(): AsyncGenerator<never> {
      throw new Error('batch mode was not expected here')
    },
    async config() {
      return { batch_safe_limit: 0, batch_safe_size: '8' }
    },
    async close() {
      client.closed = true
    },
  }
  return client
}

const ok = (id: string, ret: unknown, extra: Partial<Extract<CliReturn, { status: 'returned' }>> = {}): CliReturn => ({
  id,
  status: 'returned',
  ret,
  retcode: 0,
  jid: JID,
  ...extra,
})

describe('brine argument parsing', () => {
  it('maps each target flag to its tgt_type and converts -t seconds to ms once', () => {
    const cases: Array<[string, string]> = [
      ['-E', 'pcre'],
      ['-G', 'grain'],
      ['-P', 'grain_pcre'],
      ['-C', 'compound'],
      ['-N', 'nodegroup'],
      ['-S', 'ipcidr'],
    ]
    for (const [flag, type] of cases) {
      const args = parseBrineArgs([flag, 'x', 'test.ping'], memoryIO())
      expect(typeof args === 'object' && args.tgtType).toBe(type)
    }
    const list = parseBrineArgs(['-L', 'web1,db1', 'cmd.run', 'uname -a', 'cwd=/tmp', '-t', '2.5', '--out', 'json', '--static'], memoryIO())
    // key=value arguments ride in Salt's __kwarg__ dict, as salt's parse_input publishes them.
    expect(list).toMatchObject({
      tgt: ['web1', 'db1'],
      tgtType: 'list',
      fun: 'cmd.run',
      arg: ['uname -a', { __kwarg__: true, cwd: '/tmp' }],
      timeout: 2500,
      out: 'json',
      static: true,
    })
    expect(parseBrineArgs(['*', 'test.ping'], memoryIO())).toMatchObject({ tgt: '*', tgtType: 'glob', arg: [], configDir: '/etc/brine', logLevel: 'warning' })
  })

  it("takes Salt's -s, --summary, --subset and --out-file flags (with their --output-file spellings)", () => {
    expect(parseBrineArgs(['-s', '*', 'test.ping'], memoryIO())).toMatchObject({ static: true, summary: false })
    expect(parseBrineArgs(['--summary', '--subset', '2', '--out-file', 'f.txt', '*', 'test.ping'], memoryIO())).toMatchObject({
      summary: true,
      subset: 2,
      outFile: { path: 'f.txt', append: false },
    })
    expect(parseBrineArgs(['--output-file', 'g.txt', '--output-file-append', '*', 'test.ping'], memoryIO())).toMatchObject({
      outFile: { path: 'g.txt', append: true },
    })
    const plain = parseBrineArgs(['*', 'test.ping'], memoryIO())
    expect(typeof plain === 'object' && [plain.subset, plain.outFile]).toEqual([undefined, undefined])
  })

  it("-d/--doc/--documentation rewrites the words as Salt's: sys.doc on '*' or the target given, the function as its argument", () => {
    const cases: Array<[string[], unknown]> = [
      [['-d'], { tgt: '*', fun: 'sys.doc', arg: [] }],
      [['--doc', 'web1'], { tgt: 'web1', fun: 'sys.doc', arg: [] }],
      [['--documentation', 'web1', 'test.ping'], { tgt: 'web1', fun: 'sys.doc', arg: ['test.ping'] }],
      [['-d', 'web1', 'sys.doc', 'test'], { tgt: 'web1', fun: 'sys.doc', arg: ['test'] }],
    ]
    for (const [argv, expected] of cases) expect(parseBrineArgs(argv, memoryIO()), argv.join(' ')).toMatchObject(expected as object)
    const tooMany = memoryIO()
    expect(parseBrineArgs(['-d', 'web1', 'test.ping', 'test.echo'], tooMany)).toBe(64)
    expect(tooMany.err()).toMatch(/brine: error: You can only get documentation for one method at one time\.\n$/)
    const noTarget = memoryIO()
    expect(parseBrineArgs([], noTarget)).toBe(64)
    expect(noTarget.err()).toBe("Usage: brine [options] <target> <function> [arguments...]\n\nbrine: error: missing required argument 'target'\n")
  })

  it('refuses bad input with exit 64 (EX_USAGE, as Salt) and a message naming the flag', () => {
    const cases: Array<[string[], RegExp]> = [
      [['-X', '*', 'test.ping'], /unknown option '-X'/],
      [['--out', 'bogus', '*', 'test.ping'], /--out <outputter>.*bogus.*nested, json, yaml, raw, txt/s],
      [['-t', '-5', '*', 'test.ping'], /-t, --timeout <seconds>.*non-negative number of seconds, got '-5'/],
      [['--timeout=soon', '*', 'test.ping'], /--timeout <seconds>.*'soon'/],
      [['-l', 'loud', '*', 'test.ping'], /--log-level <level>.*loud/],
      [['-E', '-L', 'x', 'test.ping'], /at most one target type; got -E, -L/],
      [['*'], /missing required argument 'function'/],
      [['*', 'not a function'], /is not a function name/],
      [['--subset', '0', '*', 'test.ping'], /--subset <n>.*'0' is invalid.*whole number of minions, at least 1/s],
      [['--subset', 'two', '*', 'test.ping'], /--subset <n>.*'two'/],
      [['--out-file-append', '*', 'test.ping'], /--out-file-append needs --out-file <path>/],
      [['--metadata', 'ticket', '*', 'test.ping'], /--metadata <mapping>.*'ticket' is invalid.*give a mapping/s],
      [['--metadata', '[1, 2]', '*', 'test.ping'], /--metadata <mapping>.*give a mapping/s],
    ]
    for (const [argv, message] of cases) {
      const io = memoryIO()
      expect(parseBrineArgs(argv, io), argv.join(' ')).toBe(64)
      expect(io.err(), argv.join(' ')).toMatch(message)
    }
  })

  it("types every argument as Salt's CLI does (yamlify_arg with Salt's YAML loader), keeping --no-parse values as text", () => {
    const typed = parseBrineArgs(['*', 'test.arg', '1', '2.5', 'True', 'None', '[1,2]', '{a: 1}', '0755', 'mode=0755', 'when=2024-01-31', 'text'], memoryIO())
    expect(typed).toMatchObject({ arg: [1, 2.5, true, null, [1, 2], { a: 1 }, 755, 'text', { __kwarg__: true, mode: 755, when: '2024-01-31' }] })
    const raw = parseBrineArgs(['--no-parse', 'mode,other', '*', 'test.arg', '0755', 'mode=0755'], memoryIO())
    expect(raw).toMatchObject({ arg: [755, { __kwarg__: true, mode: '0755' }] })
  })

  it("prints usage errors in optparse's layout, as Salt's parsers do", () => {
    const io = memoryIO()
    expect(parseBrineArgs(['-X', '*', 'test.ping'], io)).toBe(64)
    expect(io.err()).toBe("Usage: brine [options] <target> <function> [arguments...]\n\nbrine: error: unknown option '-X'\n")
  })

  it('prints help and the version with exit 0', () => {
    const io = memoryIO()
    expect(parseBrineArgs(['--version'], io)).toBe(0)
    expect(io.out()).toBe('0.1.0\n')
    const help = memoryIO()
    expect(parseBrineArgs(['--help'], help)).toBe(0)
    expect(help.out()).toMatch(/--grain-pcre/)
  })
})

describe('brine runs and exit codes', () => {
  it('prints each return with the nested outputter and exits 0', async () => {
    const client = fakeClient(['web1', 'db1'], [ok('web1', true), ok('db1', true)])
    const io = memoryIO()
    expect(await runBrine(['-t', '3', '*', 'test.ping'], io, { createClient: () => client })).toBe(0)
    expect(io.out()).toBe('web1:\n    True\ndb1:\n    True\n')
    expect(client.calls[0]).toEqual(['*', 'test.ping', [], { tgtType: 'glob', timeout: 3000 }])
    expect(client.closed).toBe(true)
  })

  it("--preview-target prints the minions the master resolves the target to, Salt's nested list by default, and runs nothing", async () => {
    const client = fakeClient(['web1', 'web2'], [])
    const io = memoryIO()
    expect(await runBrine(['--preview-target', '-G', 'role:web', 'test.ping'], io, { createClient: () => client })).toBe(0)
    expect(io.out()).toBe('- web1\n- web2\n')
    expect(client.previews).toEqual([['role:web', 'test.ping', { tgtType: 'grain' }]])
    expect(client.calls).toEqual([])
    const json = memoryIO()
    expect(await runBrine(['--preview-target', '--out', 'json', 'nobody*', 'test.ping'], json, { createClient: () => fakeClient([], []) })).toBe(0)
    expect(JSON.parse(json.out())).toEqual([])
  })

  it('--metadata goes with the job as a mapping, typed as Salt types a word', async () => {
    const client = fakeClient(['web1'], [ok('web1', true)])
    expect(await runBrine(['--metadata', '{ticket: 8, owner: ops, urgent: True}', '*', 'test.ping'], memoryIO(), { createClient: () => client })).toBe(0)
    expect(client.calls[0]).toEqual(['*', 'test.ping', [], { tgtType: 'glob', metadata: { ticket: 8, owner: 'ops', urgent: true } }])
  })

  it("exits 2 with Salt's message when no minion matched", async () => {
    const io = memoryIO()
    expect(await runBrine(['nobody', 'test.ping'], io, { createClient: () => fakeClient([], []) })).toBe(2)
    expect(io.err()).toBe('No minions matched the target. No command was sent, no jid was assigned.\n')
    const asyncIO = memoryIO()
    expect(await runBrine(['--async', 'nobody', 'test.ping'], asyncIO, { createClient: () => fakeClient([], []) })).toBe(2)
  })

  it('exits 1 when a minion returned a non-zero retcode, and uses its outputter hint', async () => {
    const io = memoryIO()
    const client = fakeClient(['web1'], [ok('web1', 'boom', { retcode: 2, success: false, out: 'txt' })])
    expect(await runBrine(['web1', 'cmd.run', 'false'], io, { createClient: () => client })).toBe(1)
    expect(io.out()).toBe('web1: boom\n')
    expect(io.err()).toBe('ERROR: Minions returned with non-zero exit code\n')
  })

  it('reports a minion that did not return and exits 1, unless --hide-timeout', async () => {
    const returns: CliReturn[] = [ok('web1', true), { id: 'ghost', status: 'missing', jid: JID }]
    const io = memoryIO()
    expect(await runBrine(['-v', '*', 'test.ping'], io, { createClient: () => fakeClient(['web1', 'ghost'], returns) })).toBe(1)
    expect(io.out()).toBe(
      `Executing job with jid ${JID}\n-------------------------------------------\n\nweb1:\n    True\nghost:\n    Minion did not return. [No response]\n`,
    )
    const hidden = memoryIO()
    expect(await runBrine(['--hide-timeout', '*', 'test.ping'], hidden, { createClient: () => fakeClient(['web1', 'ghost'], returns) })).toBe(0)
    expect(hidden.out()).toBe('web1:\n    True\n')
  })

  it("reports a listed id that is not an accepted minion as not returning and exits 1 (Salt's missing)", async () => {
    const io = memoryIO()
    expect(await runBrine(['-L', 'web1,ghost', 'test.ping'], io, { createClient: () => fakeClient(['web1'], [ok('web1', true)], ['ghost']) })).toBe(1)
    expect(io.out()).toBe('web1:\n    True\nghost:\n    Minion did not return. [No response]\n')
    expect(io.err()).toBe('ERROR: Minions returned with non-zero exit code\n')
    // One that returned after all (through a syndic) is not reported.
    const found = memoryIO()
    expect(
      await runBrine(['-L', 'web1,far1', 'test.ping'], found, { createClient: () => fakeClient(['web1'], [ok('web1', true), ok('far1', true)], ['far1']) }),
    ).toBe(0)
    expect(found.out()).toBe('web1:\n    True\nfar1:\n    True\n')
    const hidden = memoryIO()
    expect(
      await runBrine(['--hide-timeout', '-L', 'web1,ghost', 'test.ping'], hidden, { createClient: () => fakeClient(['web1'], [ok('web1', true)], ['ghost']) }),
    ).toBe(0)
    const statics = memoryIO()
    expect(
      await runBrine(['--static', '--out', 'json', '-L', 'web1,ghost', 'test.ping'], statics, {
        createClient: () => fakeClient(['web1'], [ok('web1', true)], ['ghost']),
      }),
    ).toBe(1)
    expect(JSON.parse(statics.out())).toEqual({ web1: true, ghost: 'Minion did not return. [No response]' })
  })

  it('--static --out json prints one document; --show-jid prints the jid first', async () => {
    const io = memoryIO()
    const client = fakeClient(['web1', 'db1'], [ok('web1', 1), ok('db1', 2)])
    expect(await runBrine(['--static', '--show-jid', '--out', 'json', '*', 'test.arg'], io, { createClient: () => client })).toBe(0)
    expect(io.out()).toBe(`jid: ${JID}\n{\n    "web1": 1,\n    "db1": 2\n}\n`)
  })

  it('takes output, output_indent and color from the master config, and --out, --out-indent and --force-color over them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-out-'))
    try {
      await writeFile(join(dir, 'master'), 'output: json\noutput_indent: pretty\ncolor: false\n')
      const returns = [ok('web1', { b: 1, a: [true] })]
      const pretty = memoryIO({ tty: true })
      expect(await runBrine(['-c', dir, '*', 'test.arg'], pretty, { createClient: () => fakeClient(['web1'], returns) })).toBe(0)
      expect(pretty.out()).toBe('{\n    "web1": {\n        "a": [\n            true\n        ],\n        "b": 1\n    }\n}\n')
      const flow = memoryIO()
      expect(
        await runBrine(['-c', dir, '--out', 'yaml', '--out-indent', '-1', '*', 'test.arg'], flow, { createClient: () => fakeClient(['web1'], returns) }),
      ).toBe(0)
      expect(flow.out()).toBe('{web1: {a: [true], b: 1}}\n')
      const forced = memoryIO()
      expect(
        await runBrine(['-c', dir, '--out', 'nested', '--force-color', '*', 'test.ping'], forced, {
          createClient: () => fakeClient(['web1'], [ok('web1', true)]),
        }),
      ).toBe(0)
      expect(forced.out()).toBe('\x1b[0;36mweb1\x1b[0;0m:\n    \x1b[0;1;33mTrue\x1b[0;0m\n')
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it("--summary prints Salt's Summary block after the returns; -v names who did not respond or failed; not with --out", async () => {
    const returns: CliReturn[] = [ok('web1', true), ok('db1', 'boom', { retcode: 1 }), { id: 'ghost', status: 'missing', jid: JID }]
    const client = () => fakeClient(['web1', 'db1', 'ghost'], returns)
    const io = memoryIO()
    expect(await runBrine(['--summary', '*', 'cmd.run', 'x'], io, { createClient: client })).toBe(1)
    const block = [
      '-------------------------------------------',
      'Summary',
      '-------------------------------------------',
      '# of minions targeted: 3',
      '# of minions returned: 2',
      '# of minions that did not return: 1',
      '# of minions with errors: 1',
    ]
    const rule = '-------------------------------------------'
    expect(io.out()).toBe(`web1:\n    True\ndb1:\n    boom\nghost:\n    Minion did not return. [No response]\n\n\n${[...block, rule].join('\n')}\n`)
    const verbose = memoryIO()
    expect(await runBrine(['--summary', '-v', '*', 'cmd.run', 'x'], verbose, { createClient: client })).toBe(1)
    expect(verbose.out()).toMatch(new RegExp(`${block.at(-1)}\nMinions not responding: ghost\nMinions with failures: db1\n${rule}\n$`))
    const json = memoryIO()
    expect(await runBrine(['--summary', '--out', 'json', '*', 'cmd.run', 'x'], json, { createClient: client })).toBe(1)
    expect(json.out()).not.toMatch(/Summary/)
  })

  it('prints the summary when the master config sets cli_summary', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-summary-'))
    try {
      await writeFile(join(dir, 'master'), 'cli_summary: true\n')
      const io = memoryIO()
      expect(await runBrine(['-c', dir, '*', 'test.ping'], io, { createClient: () => fakeClient(['web1'], [ok('web1', true)]) })).toBe(0)
      expect(io.out()).toMatch(/^web1:\n    True\n\n\n-+\nSummary\n-+\n# of minions targeted: 1\n/)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('--subset runs the job on the minions picked, as a list target; exits 2 when none has the function', async () => {
    const client = fakeClient(['db1', 'web2'], [ok('db1', true), ok('web2', true)], [], ['db1', 'web2', 'web3'])
    const io = memoryIO()
    expect(await runBrine(['--subset', '2', '-t', '4', '-G', 'os:Debian', 'test.ping'], io, { createClient: () => client })).toBe(0)
    expect(client.subsets[0]).toEqual(['os:Debian', 'test.ping', 2, { tgtType: 'grain', timeout: 4000 }])
    expect(client.calls[0]).toEqual([['db1', 'web2'], 'test.ping', [], { tgtType: 'list', timeout: 4000 }])
    expect(io.out()).toBe('db1:\n    True\nweb2:\n    True\n')
    const none = fakeClient(['db1'], [], [], [])
    const nothing = memoryIO()
    expect(await runBrine(['--subset', '1', '*', 'no.such'], nothing, { createClient: () => none })).toBe(2)
    expect(none.calls).toEqual([])
    expect(nothing.err()).toMatch(/No minions matched the target/)
  })

  it('--out-file writes the returns to a file (emptied first, or appended to) without colour, the rest on stdout', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-outfile-'))
    try {
      const path = join(dir, 'out.txt')
      await writeFile(path, 'old contents\n')
      const returns = [ok('web1', true), { id: 'ghost', status: 'missing', jid: JID } as CliReturn]
      const io = memoryIO({ tty: true })
      expect(
        await runBrine(['--out-file', path, '--show-jid', '--summary', '*', 'test.ping'], io, { createClient: () => fakeClient(['web1', 'ghost'], returns) }),
      ).toBe(1)
      expect(await readFile(path, 'utf8')).toBe('web1:\n    True\nghost:\n    Minion did not return. [No response]\n')
      expect(io.out()).toMatch(new RegExp(`^jid: ${JID}\n\n\n-+\nSummary\n`))
      const again = memoryIO()
      expect(
        await runBrine(['--out-file', path, '--out-file-append', '--out', 'json', '*', 'test.ping'], again, {
          createClient: () => fakeClient(['web1'], [ok('web1', 2)]),
        }),
      ).toBe(0)
      expect(await readFile(path, 'utf8')).toMatch(/\[No response\]\n\{\n    "web1": 2\n\}\n$/)
      expect(again.out()).toBe('')
      const missingDir = memoryIO()
      const client = fakeClient(['web1'], [ok('web1', 2)])
      expect(await runBrine(['--out-file', join(dir, 'no', 'such', 'f'), '*', 'test.ping'], missingDir, { createClient: () => client })).toBe(64)
      expect(missingDir.err()).toMatch(/--out-file: cannot open .*no\/such\/f: ENOENT/)
      expect(client.calls).toEqual([])
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it("sys.doc prints each function's docstring once, sorted, after every return (Salt's CLI); with --out as nested documents", async () => {
    const returns: CliReturn[] = [
      ok('web1', { 'test.ping': 'Ping the minion.', 'sys.doc': 'Return the docstrings.' }),
      ok('db1', { 'test.ping': 'Another text, not shown: web1 gave one first.', 'cmd.run': 'Run a command.', 'test.empty': '' }),
      ok('old1', "'sys.doc' is not available."),
    ]
    const client = () => fakeClient(['web1', 'db1', 'old1'], returns)
    const io = memoryIO()
    expect(await runBrine(['*', 'sys.doc'], io, { createClient: client })).toBe(0)
    expect(io.out()).toBe('cmd.run:\nRun a command.\n\nsys.doc:\nReturn the docstrings.\n\ntest.ping:\nPing the minion.\n\n')
    const nested = memoryIO()
    expect(await runBrine(['--out', 'json', '-d'], nested, { createClient: client })).toBe(0)
    expect(nested.out()).toBe('cmd.run:\n    Run a command.\nsys.doc:\n    Return the docstrings.\ntest.ping:\n    Ping the minion.\n')
    const none = memoryIO()
    expect(await runBrine(['-d', 'old1'], none, { createClient: () => fakeClient(['old1'], [ok('old1', 'not available')]) })).toBe(2)
    expect(none.err()).toBe('No minions found to gather docs from\n')
  })

  it('--async prints the job id without waiting', async () => {
    const io = memoryIO()
    expect(await runBrine(['--async', '*', 'test.ping'], io, { createClient: () => fakeClient(['web1'], []) })).toBe(0)
    expect(io.out()).toBe(`Executed command with job ID: ${JID}\n`)
  })

  it('exits 1 with the client error when the master cannot be reached', async () => {
    const io = memoryIO()
    const client = fakeClient(['web1'], [])
    client.runJob = async () => {
      throw new Error('root key /var/cache/brine/master/.root_key: does not exist; is the master running, and are you its user?')
    }
    expect(await runBrine(['*', 'test.ping'], io, { createClient: () => client })).toBe(1)
    expect(io.err()).toMatch(/^brine: root key .* are you its user\?\n$/)
  })
})
