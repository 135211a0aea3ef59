import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect } from 'vitest'
import { runApi } from '../src/commands/api.js'
import { runBrine } from '../src/commands/brine.js'
import { runCall } from '../src/commands/call.js'
import { runMaster, runMinion, runSyndic } from '../src/commands/daemon.js'
import { runKey } from '../src/commands/key.js'
import { runRun } from '../src/commands/run.js'
import type { CommandIO } from '../src/io.js'

const cliDir = fileURLToPath(new URL('..', import.meta.url))

export type Command = (argv: readonly string[], io: CommandIO) => Promise<number>

/** Every command the CLI ships, by its bin's name. */
export const COMMANDS: Array<[string, Command]> = [
  ['brine', runBrine],
  ['brine-key', runKey],
  ['brine-call', runCall],
  ['brine-run', runRun],
  ['brine-master', runMaster],
  ['brine-minion', runMinion],
  ['brine-api', runApi],
  ['brine-syndic', runSyndic],
]

/** A CommandIO that records what a command wrote. */
export function memoryIO(
  options: { answers?: string[]; signal?: AbortSignal; tty?: boolean; stderrTTY?: boolean } = {},
): CommandIO & { out: () => string; err: () => string } {
  let out = ''
  let err = ''
  const io: CommandIO & { out: () => string; err: () => string } = {
    stdout: { write: (text: string) => (out += text), isTTY: options.tty ?? false },
    stderr: { write: (text: string) => (err += text), isTTY: options.stderrTTY ?? false },
    out: () => out,
    err: () => err,
  }
  if (options.answers !== undefined) {
    const answers = [...options.answers]
    io.prompt = async (question) => {
      out += question
      return answers.shift() ?? ''
    }
  }
  if (options.signal !== undefined) io.signal = options.signal
  return io
}

/**
 * Every module URL the built `bin` (default `brine`) loads when run with `args` (a module hook records them); the run
 * must succeed unless `run.status` says what it should exit with.
 */
export function modulesLoadedBy(args: string[], bin = 'brine', run: { env?: NodeJS.ProcessEnv; status?: number; stderr?: RegExp } = {}): string[] {
  const root = mkdtempSync(join(tmpdir(), 'brine-loads-'))
  try {
    const hook = join(root, 'hook.mjs')
    const list = join(root, 'loaded.txt')
    writeFileSync(
      hook,
      `import { registerHooks } from 'node:module'\nimport { appendFileSync } from 'node:fs'\n` +
        `registerHooks({ load(url, context, next) { appendFileSync(${JSON.stringify(list)}, url + '\\n'); return next(url, context) } })\n`,
    )
    const result = spawnSync(process.execPath, ['--import', hook, `${cliDir}bin/${bin}.js`, ...args], { encoding: 'utf8', env: run.env ?? process.env })
    expect(result.status, result.stderr).toBe(run.status ?? 0)
    if (run.stderr !== undefined) expect(result.stderr).toMatch(run.stderr)
    return readFileSync(list, 'utf8').trim().split('\n')
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
}
