import { runApi } from '../src/commands/api.js'
import { runBrine } from '../src/commands/brine.js'
import { runCall } from '../src/commands/call.js'
import { runMaster, runMinion, runSyndic } from '../src/commands/daemon.js'
import { runKey } from '../src/commands/key.js'
import { runRun } from '../src/commands/run.js'
import type { CommandIO } from '../src/io.js'

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
