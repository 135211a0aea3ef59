/**
 * @packageDocumentation
 * `@brine/master` is the Brine master daemon's core (DESIGN §3–§6): it serves every configured
 * transport at once and answers requests through a typed `MasterService` (publish, runner, wheel,
 * minion `_auth`, returns, events and grains) behind one `authorize` step that turns a request's
 * credentials into a `Caller` (the root key today; a caller carries a user name and Salt ACL
 * permissions, checked on every publish, runner and wheel). It publishes sealed and signed jobs
 * (targeted for list targets), opens each minion's sealed returns and events, spreads that crypto over
 * `worker_threads`, rotates the session key, fires Salt's event tags on its local event bus, and opens
 * the job cache `master_job_cache` names. Under `order_masters` it heads a tree of syndics: it publishes
 * to them even when no minion of its own matches, accepts a syndic's `_syndic_return` only for the
 * minions that syndic announced for that job, and fires each return's event exactly once.
 */
export { Master, type MasterOptions, type TransportEndpoints } from './master.js'
export { DEFAULT_EVENT_BUS_HWM, EventBus, eventBusHwm, type EventBusOptions, type EventListener } from './event-bus.js'
export { MemoryJobStore, selectJobs } from './job-store.js'
export { GrainsCache } from './grains-cache.js'
export { FanoutPublishServer } from './fanout-publisher.js'
export {
  MasterService,
  returnEventData,
  type KeyChangeListener,
  type MasterServiceOptions,
  type MasterServiceSettings,
  type RunnerCall,
  type RunnerReply,
  type SessionControl,
  type SyndicRefusal,
} from './master-service.js'
export { Announcements, JobTargets, SyndicRegistry, type PublishedJob } from './syndics.js'
export { Authorizer, masterCaller, rootCaller, type AuthorizerOptions, type Caller, type Credentials, type Permissions } from './authorize.js'
export { permits, type AclEntry, type Action } from './acl.js'
export { JobPublisher, type JobPublisherOptions, type JobRequest } from './job-publisher.js'
export { gather, type GatherDeps, type GatherOptions } from './gather.js'
export { MasterWireAdapter, type MasterWireAdapterOptions } from './wire-adapter.js'
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
export { runWheel, WHEEL_FUNCTIONS, type WheelOutcome, type WheelContext } from './wheel.js'
export { InlinePool, ThreadPool, hashKey, type RequestPool, type ThreadPoolOptions } from './worker-pool.js'
export { RequestCrypto, type WorkerTask } from './request-worker.js'
export {
  PermissionDeniedError,
  MalformedRequestError,
  MasterStateError,
  EventBusError,
  UnknownWheelFunctionError,
  UnknownRunnerError,
  WorkerPoolError,
  RebuiltWorkerError,
} from './errors.js'
