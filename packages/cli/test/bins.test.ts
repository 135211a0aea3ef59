import { execFileSync } from 'node:child_process'
import { readFileSync, statSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { runBrine } from '../src/commands/brine.js'
import { runCall } from '../src/commands/call.js'
import { runMaster, runMinion, runSyndic } from '../src/commands/daemon.js'
import { runKey } from '../src/commands/key.js'
import { runApi } from '../src/commands/api.js'
import { runRun } from '../src/commands/run.js'
import { BRINE_VERSION, type CommandIO } from '../src/io.js'
import { memoryIO } from './helpers.js'

const cliDir = fileURLToPath(new URL('..', import.meta.url))
const repoRoot = fileURLToPath(new URL('../../..', import.meta.url))
const manifest = JSON.parse(readFileSync(`${cliDir}package.json`, 'utf8')) as { bin: Record<string, string>; files: string[] }
const lock = JSON.parse(readFileSync(`${repoRoot}package-lock.json`, 'utf8')) as { packages: Record<string, { bin?: Record<string, string> }> }

describe('bins that npm can link at install time', () => {
  it('point at committed launchers (npm ci links a bin only if its file exists before the build), in package.json and the lock', () => {
    const committed = execFileSync('git', ['ls-files', 'bin'], { cwd: cliDir, encoding: 'utf8' }).trim().split('\n')
    expect(Object.keys(manifest.bin).sort()).toEqual(['brine', 'brine-api', 'brine-call', 'brine-key', 'brine-master', 'brine-minion', 'brine-run', 'brine-syndic'])
    for (const [name, path] of Object.entries(manifest.bin)) {
      expect(path).toBe(`./bin/${name}.js`)
      expect(committed).toContain(`bin/${name}.js`)
      expect(readFileSync(`${cliDir}${path}`, 'utf8')).toMatch(/^#!\/usr\/bin\/env node\n/)
      expect(statSync(`${cliDir}${path}`).mode & 0o111).not.toBe(0)
      // npm ci links what the lock says, not package.json.
      expect(lock.packages['packages/cli']!.bin![name]).toBe(path.slice(2))
    }
    expect(manifest.files).toEqual(expect.arrayContaining(['dist', 'bin']))
  })
})

type Command = (argv: readonly string[], io: CommandIO) => Promise<number>
const commands: Array<[string, Command]> = [
  ['brine', runBrine],
  ['brine-key', runKey],
  ['brine-call', runCall],
  ['brine-run', runRun],
  ['brine-master', runMaster],
  ['brine-minion', runMinion],
  ['brine-api', runApi],
  ['brine-syndic', runSyndic],
]

describe.each(commands)('%s --versions-report', (_name, command) => {
  it("prints Salt's versions report and exits 0, needing no other argument", async () => {
    const io = memoryIO()
    expect(await command(['--versions-report'], io)).toBe(0)
    expect(io.out()).toMatch(new RegExp(`^Brine Version:\\n +Brine: ${BRINE_VERSION.replaceAll('.', '\\.')}\\n`))
    expect(io.out()).toMatch(/\n +commander: \d+\.\d+\.\d+\n/)
    expect(io.out()).toMatch(/\n +libzmq: 4\.\d+\.\d+\n/)
    expect(io.out()).toContain('System Versions:\n')
    expect(io.err()).toBe('')
  })
})
