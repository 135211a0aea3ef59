// Plain JavaScript, run by the launcher before any of Brine loads (see launch.js).
//
// Some of what sizes a daemon's memory is fixed when its process starts: the heap's V8 flags (the young
// generation's bound) and glibc's malloc arenas (read at the first malloc). `v8.setFlagsFromString` later does
// not resize a heap, so a daemon that wants them re-executes itself once, same pid (systemd, the harness and the
// bench see one process), with the flags on its command line and the variables in its environment; worker
// threads take both from the process (the master clears its semi-space flag once started, so its request workers
// take the smaller bound their pool gives them). A program that starts the daemon with Node itself (Brine's
// harness: the tests, the bench, the demo) passes them at once instead (`daemonStartOptions`), which spares the
// second start. Which compilers run is read each time V8 decides to optimise a function, so those flags are set
// in the running process before any of Brine loads, with no second start either. What the user chose wins: a flag
// named on the command line or in NODE_OPTIONS, in its `--flag` or `--no-flag` form, and a variable already set.
import { setFlagsFromString } from 'node:v8'

/**
 * The master's semi-space bound in MiB: its young generation is twice this. V8 sizes the young generation by
 * the machine's memory and grows it under allocation pressure to 64 MiB a semi-space, and once grown it stays
 * grown: a master that served one burst kept 128 MiB of it (and each request worker thread its own) for the
 * rest of its life. A smaller bound promotes more short-lived objects to the old generation; since a burst's
 * requests in flight are bounded by bytes (and wait as frames, not decoded objects), little of a burst survives two
 * scavenges, so 8 MiB costs no old-generation growth (docs/performance.md, "A burst's holders").
 */
export const MASTER_SEMI_SPACE_MB = 8

/**
 * glibc gives each thread that allocates an arena of its own, up to eight per core, and returns freed memory
 * to the system only from the top of each. The master's frames are allocated on one thread and freed on
 * another (request workers, libuv's pool, V8's helpers), so under a burst every arena kept its own partly free
 * pages. Two arenas serve the master's handful of threads.
 */
export const MASTER_MALLOC_ARENAS = 2

/**
 * The runtime of each daemon, by bin name: `flags` and `env` it re-executes into, `v8Flags` it sets as it runs.
 * - brine-master: its young generation bounded, its malloc arenas few. Its old generation's growth is set once
 *   it runs (src/daemon-process.ts, 150 %): a tighter bound here (50 %) kept less garbage after a load but cost
 *   the master a sixth of its returns per second (docs/performance.md).
 * - brine-minion: no Turbofan. Much of what an idle minion touches of the node binary beyond what any Node
 *   process does is the compilers' own code, and Turbofan is the largest of them. The interpreter, Sparkplug
 *   and Maglev stay: a job's own path (opening the publish, sealing the return: tweetnacl, msgpack) runs as
 *   fast under Maglev, where the interpreter alone made it several times slower. Only long-running
 *   JavaScript in a job (a module's own loops) loses Turbofan's last factor. Not `--jitless` either, which
 *   also takes WebAssembly away, and with it Node's `fetch` (cp.get_url). `node --turbofan brine-minion`
 *   gives it back (NODE_OPTIONS does not carry V8's compiler flags). And its young generation kept at its initial
 *   size: loading the modules at start would grow it for good, and a minion allocates little per job. Set here for
 *   its one-file build as for its modules (src/bin/brine-minion.ts sets it too, for `node dist/bin/brine-minion.js`).
 */
export const DAEMON_RUNTIME = {
  'brine-master': {
    flags: [`--max-semi-space-size=${MASTER_SEMI_SPACE_MB}`],
    env: { MALLOC_ARENA_MAX: String(MASTER_MALLOC_ARENAS) },
    v8Flags: [],
  },
  'brine-minion': { flags: [], env: {}, v8Flags: ['--no-turbofan', '--semi-space-growth-factor=1'] },
}

/** `--max_semi_space_size=16` → `max-semi-space-size`, `--no_turbofan` → `turbofan`: V8 takes dashes and underscores alike. */
function flagName(arg) {
  const match = /^--(?:no[-_])?([^=]+)/.exec(arg)
  return match === null ? undefined : match[1].replaceAll('_', '-')
}

/** Whether the command line or NODE_OPTIONS already sets the flag `flag` names, either way. */
export function flagChosen(flag, execArgv, nodeOptions = '') {
  const name = flagName(flag)
  return [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].some((arg) => flagName(arg) === name)
}

/**
 * What to re-execute with for `runtime` ({flags, env}): the argv with the flags the user did not choose
 * before Node's own options (so a later one of the user's would win), and the environment with the
 * variables not already set; undefined when there is nothing to add.
 */
export function runtimeExec(runtime, argv, execArgv, env) {
  const { nodeArgs, vars } = runtimeStart(runtime, execArgv, env)
  if (nodeArgs.length === 0 && Object.keys(vars).length === 0) return undefined
  return { argv: [argv[0], ...nodeArgs, ...execArgv, ...argv.slice(1)], env: { ...env, ...vars } }
}

/** Of `runtime`'s `flags` and `env`, those neither `execArgv` nor `env` (its NODE_OPTIONS, its variables) chose: `{ nodeArgs, vars }`. */
export function runtimeStart(runtime, execArgv, env) {
  const nodeArgs = runtime.flags.filter((flag) => !flagChosen(flag, execArgv, env.NODE_OPTIONS))
  const vars = Object.fromEntries(Object.entries(runtime.env).filter(([name]) => env[name] === undefined))
  return { nodeArgs, vars }
}

/**
 * How a program that starts the daemon `name` with Node itself (`node <nodeArgs> <execArgv> <bin>`, as Brine's
 * harness does) starts it in its runtime at once, so that the daemon need not re-execute (a second start of Node):
 * Node's flags to pass before the bin and the variables to add to its environment, leaving out what `execArgv`
 * (the Node options the program passes anyway) or `env` already chose. Nothing for a bin without a runtime.
 */
export function daemonStartOptions(name, execArgv = [], env = process.env) {
  const runtime = DAEMON_RUNTIME[name]
  return runtime === undefined ? { nodeArgs: [], vars: {} } : runtimeStart(runtime, execArgv, env)
}

/** Of `runtime`'s `v8Flags`, those the user did not choose either way. */
export function runtimeV8Flags(runtime, execArgv, env) {
  return (runtime.v8Flags ?? []).filter((flag) => !flagChosen(flag, execArgv, env.NODE_OPTIONS))
}

/** Sets `runtime`'s V8 flags in this process, then re-executes it (same pid) into the rest; returns when it need not (or cannot). */
export function enterRuntime(runtime) {
  for (const flag of runtimeV8Flags(runtime, process.execArgv, process.env)) setFlagsFromString(flag)
  // process.execve is Node 22.15+/23.11+ and POSIX only: elsewhere the daemon runs with Node's defaults.
  if (typeof process.execve !== 'function' || process.platform === 'win32') return
  const exec = runtimeExec(runtime, process.argv, process.execArgv, process.env)
  if (exec !== undefined) process.execve(process.execPath, exec.argv, exec.env)
}

/** Re-executes this process into the runtime of the daemon `name` (see {@link DAEMON_RUNTIME}); other bins run as started. */
export function enterDaemonRuntime(name) {
  const runtime = DAEMON_RUNTIME[name]
  if (runtime !== undefined) enterRuntime(runtime)
}
