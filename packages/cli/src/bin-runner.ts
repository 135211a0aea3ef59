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
  // The command has closed everything it opened. Exit once its output is flushed (the empty
  // writes call back after everything queued before them) rather than when the event loop drains:
  // that would wait for the background teardown of every connection a daemon had accepted (libzmq's, when it had
  // any: 1.5 s for a master with a thousand minions), all of it after the master had stopped.
  process.exitCode = code
  process.stdout.write('', () => process.stderr.write('', () => process.exit(code)))
  // A reader that went away fails the pending writes (EPIPE): exit then. A slow or paused reader (a pager, a
  // loaded machine reading 70 MB of JSON) gets every byte, as from any Unix command.
  for (const stream of [process.stdout, process.stderr]) stream.once('error', () => process.exit(code))
}
