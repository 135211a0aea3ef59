/**
 * @packageDocumentation
 * `@brine/master` is the Brine master daemon's core (DESIGN §3–§5): it serves every configured
 * transport at once, answers `_auth` from its key store, takes `publish`, `wheel` and `runner`
 * (jobs.*, manage.*) from local clients holding the root key, publishes sealed and signed jobs (targeted for list targets),
 * opens each minion's sealed returns and events, spreads that crypto over `worker_threads`,
 * rotates the session key, and fires Salt's event tags on its local event bus.
 */
export { Master, type MasterOptions, type TransportEndpoints } from './master.js'
export { DEFAULT_EVENT_BUS_HWM, EventBus, EventBusError, eventBusHwm, type EventBusOptions, type EventListener } from './event-bus.js'
export { MemoryJobStore, selectJobs } from './job-store.js'
export { GrainsCache } from './grains-cache.js'
export { FanoutPublishServer } from './fanout-publisher.js'
export { MasterRequestHandler, returnEventData, type MasterRequestHandlerOptions, type JobRequest } from './request-handler.js'
export {
  RUNNERS,
  findRunner,
  runRunner,
  jidToTime,
  parseTimeArgument,
  formatJob,
  compareVersions,
  type GatheredJob,
  type RunnerArgs,
  type RunnerContext,
  type RunnerFunction,
} from './runners/index.js'
export { masterVersion } from './version.js'
export { runWheel, WHEEL_FUNCTIONS, type WheelOutcome, type WheelContext } from './wheel.js'
export { InlinePool, ThreadPool, hashKey, type RequestPool, type ThreadPoolOptions } from './worker-pool.js'
export { RequestCrypto, type WorkerTask } from './request-worker.js'
export { PermissionDeniedError, MalformedRequestError, UnknownWheelFunctionError, UnknownRunnerError, WorkerPoolError, RebuiltWorkerError } from './errors.js'
