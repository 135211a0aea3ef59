/**
 * @packageDocumentation
 * `@brine/master` is the Brine master daemon's core (DESIGN §3–§6): it serves every configured
 * transport at once and answers requests through a typed `MasterService` (publish, runner, wheel,
 * minion `_auth`, returns, events and grains) behind one `authorize` step that turns a request's
 * credentials into a `Caller`: the root key, or Salt's external auth (`external_auth` with the `file`
 * backend — text, htpasswd, htdigest files — and eauth tokens issued by `mk_token`, stored under
 * `token_dir`), the caller carrying the user's Salt ACL, checked on every publish, runner and wheel. It publishes sealed and signed jobs
 * (targeted for list targets) stamped with their issue time and expiry, opens each minion's sealed
 * returns and events and applies each once inside its time window, stores a return only from a minion
 * its job could reach, spreads the crypto over `worker_threads`, rotates the session key, fires Salt's
 * event tags on its local event bus, and opens the job cache `master_job_cache` names (pruned so that a
 * clock jump never empties it). Under `order_masters` it heads a tree of
 * syndics: it publishes to them even when no minion of its own matches, accepts a syndic's
 * `_syndic_return` only for the minions that syndic announced for a job it issued, and fires each
 * return's event exactly once. Its file server serves `file_roots` to minions in `file_buffer_size`
 * chunks over the sealed channel, paths confined to the roots, and takes `cp.push` under `file_recv`.
 */
export { Master, type MasterOptions, type TransportEndpoints } from './master.js'
export { DEFAULT_EVENT_BUS_HWM, EventBus, eventBusHwm, type EventBusOptions, type EventListener } from './event-bus.js'
export { MemoryJobStore, selectJobs } from './job-store.js'
export { GrainsCache } from './grains-cache.js'
export { FanoutPublishServer } from './fanout-publisher.js'
export {
  MasterService,
  type AuthContext,
  type KeyChangeListener,
  type MasterServiceOptions,
  type MasterServiceSettings,
  type AsyncReply,
  type RunnerCall,
  type RunnerReply,
  type WheelReply,
  type SessionControl,
} from './master-service.js'
export { SyndicIntake, type SyndicIntakeOptions, type SyndicRefusal } from './syndic-intake.js'
export { TokenCommands } from './eauth/token-commands.js'
export { Announcements, SyndicRegistry } from './syndics.js'
export {
  Authorizer,
  masterCaller,
  rootCaller,
  viaOfRequest,
  type AuthorizerOptions,
  type Caller,
  type CallerVia,
  type Credentials,
  type Permissions,
} from './authorize.js'
export {
  ExternalAuth,
  SUPPORTED_EAUTH_BACKENDS,
  type AuthBackend,
  type EauthIdentity,
  type ExternalAuthOptions,
  type MadeToken,
} from './eauth/external-auth.js'
export { FileAuthBackend, fileBackendSettings, verifyHtpasswd, type FileBackendSettings } from './eauth/file-backend.js'
export { TokenStore, isTokenName, type TokenData } from './eauth/token-store.js'
export { exprMatch, fillAuthList } from './eauth/auth-list.js'
export { permits, type AclEntry, type Action, type Grantee } from './acl.js'
export { JobPublisher, type JobPublisherOptions, type JobRequest, type NamedJob } from './job-publisher.js'
export { IssuedJobs, type IssuedJob, type IssuedJobsOptions, type PublishedJob } from './issued-jobs.js'
export { gather, type GatherDeps, type GatherOptions } from './gather.js'
export { MasterWireAdapter, isOperatorRequest, type MasterWireAdapterOptions } from './wire-adapter.js'
export { FileServer, FileRecvRefusedError, fileServerFromConfig, type FileServerOptions, type FileServerStats } from './file-server/file-server.js'
export { FileRoots, MAX_LISTED_ENTRIES, type FileRootsOptions, type FoundFile } from './file-server/roots.js'
export {
  RUNNERS,
  findRunner,
  runRunner,
  jidToTime,
  parseTimeArgument,
  formatJob,
  compareVersions,
  timeoutOf,
  waitsOf,
  type GatheredJob,
  type RunnerArgs,
  type RunnerContext,
  type RunnerFunction,
} from './runners/index.js'
export { masterVersion } from './version.js'
export { AuditLog, auditLogPath, auditTag, type AuditCall, type AuditQuery, type AuditRecord } from './audit/audit-log.js'
export { maskSecrets, MASK } from './audit/mask.js'
export { MinionEventGate, type MinionEventGateOptions } from './minion-event-gate.js'
export { callerTagProblem, minionTagProblem } from './tag-rules.js'
export { Reactor, reactorRules, REACTOR_ERROR_TAG, REACTOR_REFUSED_TAG, type ReactorOptions, type ReactorRule, type ReactorService } from './reactor/reactor.js'
export { reactionCalls, type ReactionCall } from './reactor/reaction.js'
export { renderReaction, type ReactionEvent } from './reactor/template.js'
export { reactorCaller } from './reactor/caller.js'
export { MasterSchedule } from './master-schedule.js'
export { runWheel, WHEEL_FUNCTIONS, type WheelOutcome, type WheelContext } from './wheel.js'
export {
  InlinePool,
  ThreadPool,
  hashKey,
  DEFAULT_WORKER_IDLE_MS,
  WORKER_YOUNG_GENERATION_MB,
  type RequestPool,
  type ThreadPoolOptions,
  type ThreadPoolStats,
  type ThreadPoolWorkers,
} from './worker-pool.js'
export { DemandPool, WORKER_START_TASKS, WORKER_START_WINDOW_MS, type DemandPoolOptions, type DemandPoolStats } from './demand-pool.js'
export { RequestCrypto, type HashVerdict, type WorkerTask } from './request-worker.js'
export { INLINE_SEAL_MAX_BYTES, PublishSealer, type PublishSealerOptions, type PublishSealerStats } from './publish-sealer.js'
export { inlineHasher, PasswordHashPool, type PasswordHasher, type PasswordHashPoolOptions, type PasswordHashStats } from './eauth/hash-pool.js'
export { MasterStateError, EventBusError, WorkerPoolError, WorkerPoolBusyError, RebuiltWorkerError, ReactionError } from './errors.js'
