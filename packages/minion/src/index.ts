/**
 * @packageDocumentation
 * `@brine/minion` is the Brine minion: it authenticates to its masters, subscribes to their
 * publishes (on the port each master's auth reply names), matches targets, runs Salt's execution
 * modules (test, cmd, cp, grains, saltutil, sys, file, service, pkg, user, group, disk, status,
 * network, environ, and custom ones synced from the master's `_modules/` or read from `module_dirs`)
 * and returns their results in Salt's shapes, spooling returns while a master is away. Its side of
 * one master is a `MasterLink` of `@brine/link` (clients, auth with a pinned key, the master's clock,
 * sealed sender, spool, opened and fresh publishes), which the syndic stands on too.
 * Its `FileClient` fetches `salt://` files from the master's file server into the cache, skipping
 * what the cache already holds.
 */
export * from './modules/index.js'
export * from './executor.js'
export * from './errors.js'
export { FileClient, fromMasterRefusal, hashLocalFile } from './file-client.js'
export type { FetchOutcome, FileClientOptions, ServerHash } from './file-client.js'
export { Minion } from './minion.js'
export { linkOptionsOf, type LinkParts } from './link-options.js'
export { authIdOf, minionStartEvents } from '@brine/link'
export type { MinionOptions } from './minion.js'
export { MasterLink } from '@brine/link'
export type { LinkPublish, MasterLinkOptions, MasterLinkStatus, ReturnRoute } from '@brine/link'
export { AllMastersPolicy, FailoverPolicy, failoverOrder, systemPolicyClock } from '@brine/link'
export type { FailoverOptions, MasterPolicy, MasterPolicyContext, PolicyClock, PolicyLink } from '@brine/link'
export type { MasterLinkEvent, MinionEvent, MinionEventType } from '@brine/link'
export { MinionAuth } from '@brine/link'
export type { MasterSession, MinionAuthOptions } from '@brine/link'
export { Returner, sendSealed, sendSealedFresh, isFinalRefusal } from '@brine/link'
export { MasterTime, systemClock } from '@brine/link'
export type { Clock } from '@brine/link'
export type { ReturnerOptions, SealedSendOptions } from '@brine/link'
export { ReturnSpool, spoolDir, SPOOL_DIR_MODE, SPOOL_FILE_MODE } from '@brine/link'
export { JobRunner, KEPT_RETURN_BYTES, KEPT_RETURNS_TOTAL_BYTES, mutableCopy } from './job-runner.js'
export type { JobRunnerOptions } from './job-runner.js'
export { encodedBytes, fitReturn, mayNeedFitting, RETURN_FRAME_RESERVE_BYTES, truncationMarker } from '@brine/link'
export type { FittedReturn } from '@brine/link'
export { MinionSchedule, scheduleFile } from './schedule.js'
export type { MinionScheduleOptions } from './schedule.js'
