/**
 * @packageDocumentation
 * `@brine/minion` is the Brine minion: it authenticates to its masters, subscribes to their
 * publishes, matches targets, runs Salt's execution modules (test, cmd, grains, saltutil, sys)
 * and returns their results in Salt's shapes, spooling returns while a master is away. Its side
 * of one master is a `MasterLink` (clients, auth with a pinned key, sealed sender, spool, opened
 * publishes), usable on its own: a syndic holds one to hear its upper master.
 */
export * from './modules/index.js'
export * from './executor.js'
export * from './errors.js'
export { Minion, minionStartEvents } from './minion.js'
export type { MinionOptions } from './minion.js'
export { MasterLink } from './master-link.js'
export type { LinkPublish, MasterLinkOptions, MasterLinkStatus, ReturnRoute } from './master-link.js'
export { AllMastersPolicy } from './master-policy.js'
export type { MasterPolicy, MasterPolicyContext } from './master-policy.js'
export type { MasterLinkEvent, MinionEvent, MinionEventType } from './lifecycle.js'
export { LifecycleEvents, sleep, settleWithin } from './lifecycle.js'
export { MinionAuth } from './auth.js'
export type { MasterSession, MinionAuthOptions } from './auth.js'
export { Returner, sendSealed } from './returner.js'
export type { ReturnerOptions, SealedSendOptions } from './returner.js'
export { ReturnSpool, spoolDir, SPOOL_DIR_MODE, SPOOL_FILE_MODE } from './spool.js'
export { JobRunner, mutableCopy } from './job-runner.js'
export type { JobRunnerOptions } from './job-runner.js'
