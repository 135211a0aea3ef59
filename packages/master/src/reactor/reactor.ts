import { AsyncLocalStorage } from 'node:async_hooks'
import { readFile } from 'node:fs/promises'
import { isAbsolute } from 'node:path'
import { ConfigError } from '@brine/config'
import { type BusEvent } from '@brine/protocol'
import { globToRegExp } from '@brine/targeting'
import { LogLimiter, silentLogger, type Logger, type LogLimiterOptions } from '@brine/core'
import type { Caller } from '../authorize.js'
import type { EventBus } from '../event-bus.js'
import type { AsyncReply, MasterService } from '../master-service.js'
import { reactionCalls, type ReactionCall } from './reaction.js'
import { renderReaction } from './template.js'

/** The tags the reactor fires about itself; it never reacts to them (a rule for `*` would otherwise feed on its own errors). */
export const REACTOR_TAG_PREFIX = 'brine/reactor/'
export const REACTOR_ERROR_TAG = `${REACTOR_TAG_PREFIX}error`
export const REACTOR_REFUSED_TAG = `${REACTOR_TAG_PREFIX}refused`

/** One entry of `reactor:`: a tag glob and the reaction files it runs, in order. */
export interface ReactorRule {
  glob: string
  files: string[]
}

/** What of the master a reaction calls: the same typed operations, behind the same permission check. */
export type ReactorService = Pick<MasterService, 'publish' | 'runnerAsync' | 'wheelAsync'>

export interface ReactorOptions {
  bus: EventBus
  service: ReactorService
  rules: readonly ReactorRule[]
  /** Who the reactions run as (`reactor_user` and its ACL). */
  caller: Caller
  /** How many reactions deep a chain of events may go (`reactor_loop_limit`). */
  loopLimit: number
  /** Reactions run at once (`reactor_worker_threads`). */
  workers: number
  /** Reactions waiting at most (`reactor_worker_hwm`). */
  hwm: number
  logger?: Logger
  /** The rate of the reactor's warnings (default: 10 a minute of each kind); tests set a clock. */
  logLimits?: LogLimiterOptions
}

interface Pending {
  event: BusEvent
  file: string
  depth: number
}

/** Reads Salt's `reactor:` setting: a list of `{tag glob: [files]}` (or `{glob: file}`); ConfigError naming what is wrong. */
export function reactorRules(value: unknown): ReactorRule[] {
  if (value === undefined || value === null) return []
  if (!Array.isArray(value)) throw new ConfigError('reactor must be a list of {tag glob: [reaction files]}', { key: 'reactor' })
  return value.map((entry: unknown) => {
    const pairs = typeof entry === 'object' && entry !== null && !Array.isArray(entry) ? Object.entries(entry) : []
    if (pairs.length !== 1) throw new ConfigError('each reactor entry must be one {tag glob: [reaction files]}', { key: 'reactor' })
    const [glob, files] = pairs[0]!
    const list = typeof files === 'string' ? [files] : files
    if (!Array.isArray(list) || list.length === 0 || !list.every((file) => typeof file === 'string' && isAbsolute(file))) {
      throw new ConfigError(`reactor ${JSON.stringify(glob)}: the reaction files must be a list of absolute paths`, { key: 'reactor' })
    }
    return { glob, files: list as string[] }
  })
}

/**
 * Salt's reactor: each event on the bus whose tag matches a rule's glob runs that rule's reaction files,
 * rendered for the event ({@link renderReaction}), their calls made as the reactor's caller through the
 * master's one permission check (and so audited). A chain of reactions is followed through the calls it makes
 * (an AsyncLocalStorage carries the depth into whatever they fire): one `loopLimit` deep is refused and logged,
 * so a reaction that fires the event it reacts to stops. Errors become `brine/reactor/error` events and log
 * lines; the reactor never throws into the bus.
 */
export class Reactor {
  readonly #o: ReactorOptions
  readonly #logger: Logger
  readonly #matchers: { test: (tag: string) => boolean; files: string[] }[]
  readonly #depth = new AsyncLocalStorage<number>()
  readonly #queue: Pending[] = []
  #running = 0
  #unsubscribe: (() => void) | undefined
  readonly #idle = new Set<() => void>()
  // Webhooks and minions' events drive the reactor, so its refusals and failures are lines a peer can cause:
  // 10 a minute of each kind, then a count (the brine/reactor/* events stay one per refusal or failure).
  readonly #refusedLog: LogLimiter
  readonly #failedLog: LogLimiter

  constructor(options: ReactorOptions) {
    this.#o = options
    this.#logger = options.logger ?? silentLogger
    this.#refusedLog = new LogLimiter(options.logLimits)
    this.#failedLog = new LogLimiter(options.logLimits)
    this.#matchers = options.rules.map((rule) => ({ test: (tag: string) => globToRegExp(rule.glob).test(tag), files: rule.files }))
  }

  start(): void {
    if (this.#matchers.length === 0 || this.#unsubscribe !== undefined) return
    this.#unsubscribe = this.#o.bus.subscribe((event) => this.#heard(event))
    this.#logger.info(`reactor: ${this.#matchers.length} rule(s), running as ${JSON.stringify(this.#o.caller.user)}`)
  }

  stop(): void {
    this.#unsubscribe?.()
    this.#unsubscribe = undefined
    this.#queue.length = 0
    // Say now how many lines were held back, rather than at a window's end after the master stopped.
    this.#refusedLog.flush()
    this.#failedLog.flush()
  }

  /** Resolves when no reaction runs or waits (tests). */
  idle(): Promise<void> {
    if (this.#running === 0 && this.#queue.length === 0) return Promise.resolve()
    return new Promise((resolve) => this.#idle.add(resolve))
  }

  #heard(event: BusEvent): void {
    if (event.tag.startsWith(REACTOR_TAG_PREFIX)) return
    const files = this.#matchers.filter((matcher) => matcher.test(event.tag)).flatMap((matcher) => matcher.files)
    if (files.length === 0) return
    // Inside a reaction's calls the store holds that reaction's depth; an event from outside starts at 0.
    const depth = (this.#depth.getStore() ?? 0) + 1
    if (depth > this.#o.loopLimit) {
      this.#refuse(event, files, `a chain of ${depth} reactions passes reactor_loop_limit (${this.#o.loopLimit}): a reaction fires what it reacts to`)
      return
    }
    for (const file of files) {
      if (this.#queue.length >= this.#o.hwm) {
        this.#refuse(event, [file], `reactor_worker_hwm (${this.#o.hwm}) reactions are already waiting`)
        continue
      }
      this.#queue.push({ event, file, depth })
    }
    this.#drain()
  }

  #refuse(event: BusEvent, files: readonly string[], reason: string): void {
    this.#refusedLog.warning(
      this.#logger,
      `reactor: refused to react to ${JSON.stringify(event.tag.slice(0, 120))} with ${files.join(', ')}: ${reason}`,
      'reactor refusals',
    )
    this.#depth.exit(() => this.#o.bus.fire(REACTOR_REFUSED_TAG, { tag: event.tag, files: [...files], reason }))
  }

  #drain(): void {
    while (this.#running < this.#o.workers && this.#queue.length > 0) {
      const next = this.#queue.shift()!
      this.#running++
      // Run with this reaction's depth, whatever context the event that queued it came from.
      void this.#depth
        .run(next.depth, () => this.#react(next))
        .finally(() => {
          this.#running--
          this.#drain()
          if (this.#running > 0 || this.#queue.length > 0) return
          for (const resolve of this.#idle) resolve()
          this.#idle.clear()
        })
    }
  }

  async #react({ event, file }: Pending): Promise<void> {
    try {
      const text = await readFile(file, 'utf8')
      const calls = reactionCalls(file, renderReaction(file, text, event))
      for (const call of calls) await this.#call(call, event, file)
    } catch (error) {
      const problem = error as Error
      this.#failedLog.warning(
        this.#logger,
        `reactor: reaction ${file} to ${JSON.stringify(event.tag.slice(0, 120))} failed: ${problem.name}: ${problem.message}`,
        'failed reactions',
      )
      this.#depth.exit(() => this.#o.bus.fire(REACTOR_ERROR_TAG, { tag: event.tag, file, error: { name: problem.name, message: problem.message } }))
    }
  }

  async #call(call: ReactionCall, event: BusEvent, file: string): Promise<{ jid: string } | AsyncReply> {
    const caller: Caller = { ...this.#o.caller, via: { client: 'reactor', tag: event.tag.slice(0, 200), reaction: file, id: call.id } }
    if (call.form === 'local') {
      return this.#o.service.publish(caller, {
        tgt: call.tgt,
        tgt_type: call.tgtType,
        fun: call.fun,
        arg: call.arg,
        kwarg: call.kwarg,
        ret: '',
        user: caller.user,
      })
    }
    if (call.form === 'runner') return this.#o.service.runnerAsync(caller, { fun: call.fun, arg: call.arg, kwarg: call.kwarg })
    return this.#o.service.wheelAsync(caller, { ...call.kwarg, fun: call.fun })
  }
}
