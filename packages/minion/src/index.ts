/**
 * @packageDocumentation
 * `@brine/minion` is the Brine minion: it authenticates to its masters, subscribes to their
 * publishes, matches targets, runs Salt's execution modules (test, cmd, grains, saltutil, sys)
 * and returns their results in Salt's shapes, spooling returns while a master is away.
 */
export * from './modules/index.js'
export * from './executor.js'
export * from './errors.js'
export { Minion, minionStartEvents } from './minion.js'
export type { MinionOptions } from './minion.js'
export type { MinionEvent, MinionEventType } from './lifecycle.js'
export { MinionAuth } from './auth.js'
export type { MasterSession, MinionAuthOptions } from './auth.js'
export { Returner, sendSealed } from './returner.js'
export type { ReturnerOptions, SealedSendOptions } from './returner.js'
export { ReturnSpool, spoolDir, SPOOL_DIR_MODE, SPOOL_FILE_MODE } from './spool.js'
export { JobRunner } from './job-runner.js'
export type { JobRunnerOptions } from './job-runner.js'
