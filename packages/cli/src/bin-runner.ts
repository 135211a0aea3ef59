import { processIO, type CommandIO } from './io.js'

export type CommandFunction = (argv: readonly string[], io: CommandIO) => Promise<number>

/**
 * Runs one command as a process: SIGINT and SIGTERM abort its signal (a daemon then stops cleanly,
 * `brine` stops waiting); a second signal exits at once. The exit code is the command's.
 */
export async function runBin(command: CommandFunction): Promise<void> {
  const controller = new AbortController()
  let signals = 0
  const onSignal = (signal: NodeJS.Signals): void => {
    signals++
    if (signals > 1) process.exit(signal === 'SIGINT' ? 130 : 143)
    controller.abort(new Error(`received ${signal}`))
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  let code: number
  try {
    code = await command(process.argv.slice(2), processIO(controller.signal))
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    code = 1
  }
  process.off('SIGINT', onSignal)
  process.off('SIGTERM', onSignal)
  process.exitCode = code
  // Everything is closed by now; a handle some library forgot must not keep the process alive.
  setTimeout(() => process.exit(code), 2000).unref()
}
