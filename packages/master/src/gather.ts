import { collectReturns, storedReturnsOf, type JobCache, type ReceivedReturn } from '@brine/common'
import { JOB_EVENT_PREFIXES, type PublishReply, type TargetType, type Tgt } from '@brine/protocol'
import { silentLogger, type Logger } from '@brine/core'
import type { EventBus } from './event-bus.js'
import type { JobRequest } from './job-publisher.js'

/** A job a runner published and the returns gathered for it. */
export interface GatheredJob {
  jid: string
  /** The minions the master expected to answer, with those behind its syndics (announced, or reported missing). */
  minions: string[]
  /** Returns that arrived (or were recovered from the job cache), by minion id. */
  returns: Map<string, ReceivedReturn>
}

export interface GatherOptions {
  tgtType?: TargetType
  /** ms to wait before asking the missing minions `saltutil.find_job`. */
  timeout: number
  /** ms each find_job round waits, and the extension while a minion still runs the job. */
  gatherJobTimeout: number
  signal?: AbortSignal
}

export interface GatherDeps {
  /** The master's own publish path for the runner's caller. */
  publish: (job: JobRequest) => Promise<PublishReply>
  bus: EventBus
  jobs: JobCache
  user: string
  /** Config `syndic_wait` in ms (0 without syndics). */
  syndicWait?: number
  logger?: Logger
}

/**
 * A runner's publish-then-collect, in-process: a bus reader opened before the publish, then the one
 * return collector (find_job rounds, job-cache recovery) over it.
 */
export async function gather(deps: GatherDeps, tgt: Tgt, fun: string, arg: readonly unknown[], options: GatherOptions): Promise<GatheredJob> {
  const controller = new AbortController()
  const events = deps.bus.iter({ match: JOB_EVENT_PREFIXES, signal: controller.signal })
  try {
    const job = (target: Tgt, tgtType: TargetType, name: string, args: readonly unknown[]): JobRequest => ({
      tgt: target,
      tgt_type: tgtType,
      fun: name,
      arg: [...args],
      kwarg: {},
      ret: '',
      user: deps.user,
    })
    const reply = await deps.publish(job(tgt, options.tgtType ?? 'glob', fun, arg))
    const returns = new Map<string, ReceivedReturn>()
    const syndics = reply.syndics ?? {}
    if (reply.minions.length === 0 && Object.keys(syndics).length === 0) return { jid: reply.jid, minions: [], returns }
    const minions = new Set(reply.minions)
    const collecting = collectReturns({
      jid: reply.jid,
      minions: reply.minions,
      target: { tgt, tgt_type: options.tgtType ?? 'glob' },
      ...(reply.syndics === undefined ? {} : { syndics: reply.syndics, syndicWait: deps.syndicWait ?? 0 }),
      events,
      source: {
        findJob: (jid, target) => deps.publish(job(target.tgt, target.tgt_type ?? 'glob', 'saltutil.find_job', [jid])),
        storedReturns: async (jid) => storedReturnsOf(await deps.jobs.getJob(jid)),
      },
      timeout: options.timeout,
      gatherJobTimeout: options.gatherJobTimeout,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      logger: deps.logger ?? silentLogger,
    })
    for await (const item of collecting) {
      minions.add(item.id)
      if (item.status === 'returned') returns.set(item.id, item)
    }
    return { jid: reply.jid, minions: [...minions], returns }
  } finally {
    controller.abort()
  }
}
