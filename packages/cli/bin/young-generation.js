// Plain JavaScript, run by the launcher before any of Brine loads (see launch.js).
//
// V8 sizes a process's young generation (its two semi-spaces) by the machine's memory and grows it under
// allocation pressure: on a machine with many GiB it reaches 64 MiB a semi-space, and once grown it stays
// grown, so a master that served one burst kept 128 MiB of young generation (and each request worker
// thread its own) for the rest of its life. Only the command line sets it for the main thread, so the
// master re-executes itself, same pid, with the bound on its command line; worker threads take V8's flags
// from it. A `--max-semi-space-size` the user gave (on the command line or in NODE_OPTIONS) wins.

/**
 * The master's semi-space bound in MiB: its young generation is twice this. Half of it promoted more of a
 * burst's short-lived objects to the old generation, which then grew further than the young one shrank.
 */
export const MASTER_SEMI_SPACE_MB = 16

const FLAG = '--max-semi-space-size'

/** Whether the user already chose the young generation's size for this process. */
export function semiSpaceChosen(execArgv, nodeOptions = '') {
  return [...execArgv, ...nodeOptions.split(/\s+/)].some((arg) => arg === FLAG || arg.startsWith(`${FLAG}=`))
}

/**
 * The argv to re-execute this process with so its semi-spaces are bounded at `megabytes`, or undefined
 * when the user chose a size already (or there is nothing to bound).
 */
export function boundedArgv(argv, execArgv, nodeOptions, megabytes) {
  if (!(megabytes > 0) || semiSpaceChosen(execArgv, nodeOptions)) return undefined
  return [argv[0], `${FLAG}=${megabytes}`, ...execArgv, ...argv.slice(1)]
}

/** Re-executes this process (same pid) with its semi-spaces bounded; returns when it need not (or cannot). */
export function boundYoungGeneration(megabytes = MASTER_SEMI_SPACE_MB) {
  // process.execve is Node 22.15+/23.11+ and POSIX only: elsewhere the master runs with V8's own sizing.
  if (typeof process.execve !== 'function' || process.platform === 'win32') return
  const argv = boundedArgv(process.argv, process.execArgv, process.env.NODE_OPTIONS, megabytes)
  if (argv === undefined) return
  process.execve(process.execPath, argv, process.env)
}
