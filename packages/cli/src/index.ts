/**
 * @packageDocumentation
 * `@brine/cli` is Brine's command line, with Salt's flags and output: `brine` (salt), `brine-master`,
 * `brine-minion`, `brine-syndic` (salt-syndic), `brine-key` (salt-key), `brine-call` (salt-call), `brine-run`
 * (salt-run, plus `event.listen`) and `brine-api` (salt-api). Each bin's logic is an importable function taking
 * argv and streams and returning the exit code. The daemons log to `log_file` (reopened on SIGHUP), write
 * `pidfile`, switch to the config's `user` after start, and check their config with `--check-config`; every
 * command has `--versions-report`.
 */
export { runBrine, parseBrineArgs, describeClientError, type BrineArgs, type BrineDeps, type CliJob, type JobClient } from './commands/brine.js'
export { planBatch, runBatchMode, type BatchPlan, type BatchView } from './commands/brine-batch.js'
export { addBatchOptions, readBatchFlags, type BatchFlags } from './commands/batch-flags.js'
export { LiveLine } from './live-line.js'
export { runKey, parseKeyArgs, KEY_DIRS, type KeyArgs, type KeyDeps, type KeyListing, type KeyWheel } from './commands/key.js'
export {
  runDaemon,
  runMaster,
  runMinion,
  runSyndic,
  loadDaemonConfig,
  type Daemon,
  type DaemonClass,
  type DaemonDeps,
  type LoadedDaemonConfig,
} from './commands/daemon.js'
export { runCheckConfig } from './commands/check-config.js'
export { DaemonLoadError, PidfileError, UserSwitchError } from './errors.js'
export { runCall } from './commands/call.js'
export { runApi } from './commands/api.js'
export { runRun, parseRunArgs, parseRunnerArguments, type RunArgs, type RunDeps, type RunnerLike, type EventSource } from './commands/run.js'
export { runBin, type CommandFunction } from './bin-runner.js'
export * from './output/index.js'
export {
  BRINE_VERSION,
  EXIT_GENERIC,
  EXIT_NO_MINIONS,
  EXIT_OK,
  EXIT_USAGE,
  processIO,
  usageError,
  versionsReport,
  type CommandIO,
  type OutputStream,
} from './io.js'
