/**
 * Passes an upper master's jobs down into the syndic's own master: same jid, `to` one less (Salt),
 * master_id kept; the lower master resolves its own targets. Then announces upward the minions it expects
 * and the lower syndics still to hear from (what they announced before the publish reply came back counted in),
 * and hands the job to the {@link ReturnFollower}. A job whose
 * master_id is this master's own is not passed down.
 */
import { type SyndicConfig } from '@brine/config'
import { parsePublishReply, type JobLoad, type PublishReply } from '@brine/protocol'
import type { MasterLink } from '@brine/link'
import type { Logger } from '@brine/core'
import { LowerMasterError } from './errors.js'
import type { UpperForwarder } from './forwarder.js'
import type { ReturnFollower } from './return-follower.js'

/** What the relay reports. */
export type RelayEvent =
  /** A job from an upper master was published into this syndic's master. */
  | { type: 'relayed'; master: string; jid: string; fun: string; minions: string[]; syndics: string[] }
  /** A job was not passed down (its master_id is this master's: it started here). */
  | { type: 'relay-skipped'; master: string; jid: string; reason: string }
  /** This syndic's master refused or did not take a job. */
  | { type: 'relay-failed'; master: string; jid: string; message: string }

export interface RelayOptions {
  /** `master_id` and `timeout` of the syndic's config. */
  opts: Pick<SyndicConfig, 'master_id' | 'timeout'>
  /** A clear request to the syndic's own master. */
  request: (load: Record<string, unknown>) => Promise<unknown>
  /** The forwarder to the upper master a link hears. */
  upper: (master: string) => UpperForwarder
  follower: ReturnFollower
  emit: (event: RelayEvent) => void
  logger: Logger
  signal: AbortSignal
}

export class Relay {
  readonly #o: RelayOptions

  constructor(options: RelayOptions) {
    this.#o = options
  }

  /** One upper master's jobs, passed down in publish order until the link closes. */
  async serve(link: MasterLink): Promise<void> {
    const { signal, logger } = this.#o
    for await (const publish of link.publishes()) {
      if (signal.aborted) break
      try {
        await this.relay(link.master, publish.job)
      } catch (error) {
        if (signal.aborted) break
        logger.error(`unexpected error while passing job ${publish.job.jid} down; continuing`, error)
      }
    }
  }

  /** Passes one job from the upper master `master` down. */
  async relay(master: string, job: Readonly<JobLoad>): Promise<void> {
    const { opts, emit, follower } = this.#o
    const upper = this.#o.upper(master)
    if (typeof opts.master_id === 'string' && job.master_id === opts.master_id) {
      emit({ type: 'relay-skipped', master, jid: job.jid, reason: `master_id ${job.master_id} is this master's` })
      return
    }
    const meta = { fun: job.fun, load: { ...job } as Record<string, unknown>, ...(job.master_id === undefined ? {} : { master_id: job.master_id }) }
    follower.route(job.jid, master)
    let reply: PublishReply
    try {
      reply = checkReply(await this.#o.request(this.#publishLoad(master, job)))
    } catch (error) {
      if (this.#o.signal.aborted) return
      const message = (error as Error).message
      this.#o.logger.error(`could not pass job ${job.jid} (${job.fun}) from ${master} down to this syndic's master: ${message}`)
      emit({ type: 'relay-failed', master, jid: job.jid, message })
      // Nobody here will answer: tell the upper master so its client does not wait for this syndic.
      upper.announce(job.jid, [], [], meta)
      follower.abandon(job.jid)
      return
    }
    const syndics = Object.keys(reply.syndics ?? {})
    // The open job carries what lower syndics announced before the reply came: their minions, and who is still pending.
    const open = await follower.open(job.jid, master, reply.minions, syndics)
    upper.announce(job.jid, open.expected, [...open.pendingSyndics], meta)
    emit({ type: 'relayed', master, jid: job.jid, fun: job.fun, minions: [...reply.minions], syndics })
    follower.opened(open)
  }

  /** The clear `publish` that passes `job` down. */
  #publishLoad(master: string, job: Readonly<JobLoad>): Record<string, unknown> {
    const to = (typeof job.to === 'number' ? job.to : this.#o.opts.timeout) - 1
    const load: Record<string, unknown> = {
      cmd: 'publish',
      tgt: job.tgt,
      tgt_type: job.tgt_type,
      fun: job.fun,
      arg: [...job.arg],
      kwarg: { ...(job.kwarg ?? {}) },
      jid: job.jid,
      ret: job.ret,
      user: job.user,
      to,
      // For the lower master's audit log: this publish was passed down by a syndic.
      origin: { client: 'syndic', address: master },
    }
    if (job.master_id !== undefined) load['master_id'] = job.master_id
    if (job.metadata !== undefined) load['metadata'] = job.metadata
    return load
  }
}

/** The lower master's publish reply, checked. */
function checkReply(reply: unknown): PublishReply {
  const checked = parsePublishReply(reply)
  if (checked === undefined) throw new LowerMasterError('publish', `it answered ${JSON.stringify(reply)?.slice(0, 200)}, not {jid, minions}`)
  return checked
}
