/**
 * @packageDocumentation
 * `@brine/cli` is Brine's command line, with Salt's flags and output: `brine` (salt), `brine-master`,
 * `brine-minion`, `brine-key` (salt-key), `brine-call` (salt-call), `brine-run` (salt-run, plus
 * `event.listen`) and `brine-api` (salt-api). Each bin's logic is an importable function taking argv and streams and returning
 * the exit code.
 */
export { runBrine, parseBrineArgs, describeClientError, type BrineArgs, type BrineDeps, type CliJob, type JobClient } from './commands/brine.js'
export { runKey, parseKeyArgs, formatKeyListing, formatFingers, KEY_DIRS, type KeyDeps, type KeyListing, type KeyWheel } from './commands/key.js'
export { runDaemon, runMaster, runMinion, loadDaemonConfig, type Daemon, type DaemonClass, type DaemonDeps } from './commands/daemon.js'
export { runCall } from './commands/call.js'
export { runApi } from './commands/api.js'
export { runRun, parseRunArgs, parseRunnerArguments, type RunArgs, type RunDeps, type RunnerLike, type EventSource } from './commands/run.js'
export { runBin, type CommandFunction } from './bin-runner.js'
export { DaemonLoadError } from './errors.js'
export * from './output/index.js'
export {
  BRINE_VERSION,
  EXIT_GENERIC,
  EXIT_NO_MINIONS,
  EXIT_OK,
  EXIT_USAGE,
  processIO,
  type CommandIO,
  type OutputStream,
} from './io.js'
