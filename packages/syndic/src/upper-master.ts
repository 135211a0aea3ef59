/**
 * One upper master, as the syndic holds it: the {@link MasterLink} that hears its jobs (configured from the
 * syndic's `syndic_master*` keys), the {@link UpperForwarder} of what goes up to it, and Salt's
 * `salt/syndic/<id>/start`, sent once it accepts this syndic.
 */
import { join } from 'node:path'
import { endpointLimitsFromConfig, masterAddressOf, returnRetryDelayMs, timeoutsFromConfig, type SyndicConfig } from '@brine/config'
import { tags } from '@brine/protocol'
import { masterAddressStem, masterPinFile, type CryptCache, type KeyPair } from '@brine/crypt'
import { linkPacingOf, MasterLink, minionStartEvents, NotAcknowledgedError, type MasterLinkEvent } from '@brine/link'
import { type Transport } from '@brine/transport'
import { sleep, type Logger } from '@brine/core'
import { BatchSpool } from './batch-spool.js'
import { UpperForwarder, type ForwarderEvent } from './forwarder.js'

export interface UpperMasterOptions {
  /** The syndic's id and config. */
  id: string
  opts: SyndicConfig
  /** One `syndic_master` entry: `host[:port]`. */
  entry: string
  keys: KeyPair
  transport: Transport
  /** Several upper masters: each has its own pin file and log prefix. */
  several: boolean
  cache: CryptCache
  /** `<cachedir>/syndic`: the link's and the batches' spools live under it. */
  dir: string
  logger: Logger
  signal: AbortSignal
  /** Returns that went up (acknowledged or spooled), per jid. */
  onSettled: (settled: ReadonlyMap<string, readonly string[]>) => void
  onEvent: (event: MasterLinkEvent | ForwarderEvent) => void
  /** Background work the syndic waits for as it stops. */
  track: (task: Promise<unknown>) => void
}

export class UpperMaster {
  readonly link: MasterLink
  readonly forwarder: UpperForwarder
  readonly #o: UpperMasterOptions
  readonly #logger: Logger

  constructor(options: UpperMasterOptions) {
    this.#o = options
    const { opts, several, dir } = options
    // `host:port` as a minion's master entries are read, else syndic_master_port.
    const { host, port } = masterAddressOf(options.entry, opts.syndic_master_port)!
    const stem = masterAddressStem(host, port)
    this.#logger = several ? options.logger.child(`master ${host}:${port}`) : options.logger
    this.link = this.#createLink(host, port, stem)
    this.forwarder = new UpperForwarder({
      id: options.id,
      link: this.link,
      spool: new BatchSpool(join(dir, 'spool', stem), opts.syndic_spool_max_bytes),
      intervalMs: timeoutsFromConfig(opts).syndicEventForwardTimeoutMs,
      retryDelayMs: () => returnRetryDelayMs(opts),
      loadCacheSize: opts.syndic_jid_forward_cache_hwm,
      maxFrameBytes: endpointLimitsFromConfig(opts).maxFrameBytes,
      onSettled: options.onSettled,
      onEvent: options.onEvent,
      logger: this.#logger.child('forward'),
      signal: options.signal,
    })
  }

  #createLink(host: string, port: number, stem: string): MasterLink {
    const { opts, several } = this.#o
    return new MasterLink({
      id: this.#o.id,
      keys: this.#o.keys,
      transport: this.#o.transport,
      host,
      port,
      // Set in config it overrides what the upper master's auth reply names; absent, the link subscribes where that master says.
      ...(opts.syndic_master_publish_port === undefined ? {} : { publishPort: opts.syndic_master_publish_port }),
      // Its jobs are fresh by the upper master's clock (clock_skew); relayed, they are stamped again in this node's master's.
      ...linkPacingOf(opts),
      pkiDir: opts.pki_dir,
      // Its own pin file: the node's minion (if any) pins its own master in minion_master.pub.
      pinFile: several ? masterPinFile(host, port, 'syndic_master') : 'syndic_master.pub',
      ...(opts.syndic_finger === '' ? {} : { masterFinger: opts.syndic_finger }),
      // The link's own return spool is not used: batches have theirs.
      spoolDir: join(this.#o.dir, 'link', stem),
      cache: this.#o.cache,
      logger: this.#logger,
      signal: this.#o.signal,
      afterAuth: async (authenticated, first) => {
        if (first) await this.#sendStart(authenticated)
        await this.forwarder.drain()
      },
      onEvent: this.#o.onEvent,
    })
  }

  /**
   * Salt's `salt/syndic/<id>/start`, once per upper master. An upper master that has not accepted this key
   * as a syndic's yet is asked again every return retry delay, in the background, until it does (the
   * operator's `brine-key --accept-syndic`): the start event is what tells the upper master this syndic is attached.
   */
  async #sendStart(link: MasterLink): Promise<void> {
    const { id, signal } = this.#o
    // The syndic's own logger, not this master's: these lines name the master themselves.
    const logger = this.#o.logger
    const [start] = minionStartEvents(id)
    const text = String(start?.data['data'] ?? '').replace(/^Minion /, 'Syndic ')
    const tag = tags.syndicStart(id)
    const send = () => link.send({ cmd: '_syndic_event', id, events: [{ tag, data: { data: text, id, tag } }] }, { tries: 1 })
    const notSyndic = (error: unknown): boolean => error instanceof NotAcknowledgedError && error.refusal === 'SyndicNotAcceptedError'
    try {
      await send()
      return
    } catch (error) {
      if (signal.aborted) return
      if (!notSyndic(error)) return logger.warning(`could not send ${tag} to ${link.master}: ${(error as Error).message}`)
      logger.warning(`${link.master} has not accepted this syndic's key as a syndic's; on that master run: brine-key --accept-syndic ${id}`)
    }
    this.#o.track(
      (async () => {
        while (await sleep(returnRetryDelayMs(this.#o.opts), signal)) {
          try {
            await send()
            logger.info(`${link.master} accepts this syndic: ${tag} sent`)
            return
          } catch (error) {
            if (!notSyndic(error)) return logger.warning(`could not send ${tag} to ${link.master}: ${(error as Error).message}`)
          }
        }
      })(),
    )
  }
}
