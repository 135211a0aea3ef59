import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { quickDaemonArgs, type Role } from '../src/commands/daemon-args.js'
import { programDaemonArgs } from '../src/commands/daemon-program.js'
import { memoryIO } from './helpers.js'

const root = mkdtempSync(join(tmpdir(), 'brine-daemon-args-'))
const notADirectory = join(root, 'file')
writeFileSync(notADirectory, '')
afterAll(() => rmSync(root, { recursive: true, force: true }))

/** Command lines the quick reader takes, each with the role it is given to. */
const READ_QUICKLY: Array<[Role, string[]]> = [
  ['minion', []],
  ['minion', ['-c', root, '-l', 'warning']],
  ['minion', [`--config-dir=${root}`, '--log-level=debug', '--id', 'web1', '--master', '10.0.0.1', '--master-port', '4606']],
  ['minion', ['-c', root, '--transport', 'nats', '--publish-port', '4605', '--root-dir', '/srv', '-u', 'brine', '--pid-file', '/run/m.pid']],
  ['minion', ['-c', root, '--log-file', '/var/log/m', '--log-file-level', 'info', '--set', 'timeout=10', '--set', 'grains={"a": 1}']],
  ['minion', ['-c', root, '--set', 'id=b', '--id', 'a', '--check-config']],
  ['minion', ['-c', root, '-c', root, '-ltrace', '-uroot', '--id=-odd-']],
  ['master', ['-c', root, '--interface', '0.0.0.0', '--ret-port', '4606', '--transport', 'tcp', '--id', 'm']],
  ['syndic', ['-c', root, '--syndic-master', 'top', '--syndic-master-port', '4506', '--syndic-transport', 'tcp', '--pid-file', '/p']],
  ['minion', ['-c', root, '--']],
]

/** Command lines left to commander: help, version, mistakes, -d. */
const LEFT_TO_COMMANDER: Array<[Role, string[]]> = [
  ['minion', ['--help']],
  ['minion', ['-h']],
  ['minion', ['--version']],
  ['minion', ['--versions-report']],
  ['minion', ['-d']],
  ['minion', ['--daemon', '-c', root]],
  ['minion', ['--no-such-flag']],
  ['minion', ['-c', root, 'extra']],
  ['minion', ['-l', 'loud']],
  ['minion', ['-c', join(root, 'missing')]],
  ['minion', ['-c', notADirectory]],
  ['minion', ['--id']],
  ['minion', ['--id', '-x']],
  ['minion', ['--check-config=yes']],
  ['minion', ['--ret-port', '4606']],
  ['master', ['--master', 'x']],
  ['syndic', ['--transport', 'tcp']],
]

describe("a daemon's command line read without commander", () => {
  it.each(READ_QUICKLY)('%s %j: what commander reads', (role, argv) => {
    const quick = quickDaemonArgs(role, argv)
    expect(quick).toBeDefined()
    const io = memoryIO()
    expect(quick).toEqual(programDaemonArgs(role, argv, io))
    expect(io.err()).toBe('')
  })

  it.each(LEFT_TO_COMMANDER)('%s %j: left to commander', (role, argv) => {
    expect(quickDaemonArgs(role, argv)).toBeUndefined()
  })

  it('keeps the flags in the order they apply: the role flags, then each --set', () => {
    expect(quickDaemonArgs('minion', ['--set', 'id=b', '--id', 'a', '--set', 'master=m'])?.overrides).toEqual(['id=a', 'id=b', 'master=m'])
  })
})
