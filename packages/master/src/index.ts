/**
 * @packageDocumentation
 * `@brine/master` is the Brine master daemon's core (DESIGN §3–§5): it serves every configured
 * transport at once, answers `_auth` from its key store, takes `publish`, `wheel` and `runner`
 * (jobs.*, manage.*) from local clients holding the root key, publishes sealed and signed jobs (targeted for list targets),
 * opens each minion's sealed returns and events, spreads that crypto over `worker_threads`,
 * rotates the session key, and fires Salt's event tags on its local event bus.
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
} from './master-service.js'
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
