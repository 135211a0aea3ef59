import { NatsOptionsError } from './errors.js'

/** `nats_subject_prefix` when none is configured. */
export const DEFAULT_SUBJECT_PREFIX = 'brine'

/** A subject token Brine writes itself: no wildcards, no spaces, nothing NATS would read as a separator. */
const TOKEN = /^[A-Za-z0-9_-]+$/
/** A minion id that can stand in a subject as it is (FQDN-like: tokens joined by dots). */
const PLAIN_ID = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/

/** Checks a `nats_subject_prefix`: dot-separated tokens of letters, digits, `_` and `-`. */
export function checkSubjectPrefix(prefix: string): string {
  if (prefix.length === 0 || prefix.length > 200 || !prefix.split('.').every((token) => TOKEN.test(token))) {
    throw new NatsOptionsError(
      'nats_subject_prefix',
      `'${prefix}' is not a subject prefix: use dot-separated tokens of letters, digits, '_' and '-' (no '*', '>' or spaces)`,
    )
  }
  return prefix
}

/**
 * The subjects of one Brine service on a broker: `<prefix>.<port>.…`. The port keeps the servers of
 * one master (publish_port, ret_port) and different masters on one prefix apart, as ports do on a host.
 *
 * - `pub.all`: broadcasts; `pub.m.<id>` (or `pub.x.<base64url id>` for ids a subject cannot hold): one minion.
 * - `hello`: a subscriber announces its id here (the master's `peer-subscribe`).
 * - `req`: requests, served by the queue group `<prefix>.<port>.masters`; replies go to `reply.<client>`.
 */
export class Subjects {
  readonly base: string
  readonly broadcast: string
  readonly hello: string
  readonly request: string
  readonly queue: string
  readonly replyPrefix: string

  constructor(prefix: string, port: number) {
    this.base = `${checkSubjectPrefix(prefix)}.${port}`
    this.broadcast = `${this.base}.pub.all`
    this.hello = `${this.base}.hello`
    this.request = `${this.base}.req`
    this.queue = `${this.base}.masters`
    this.replyPrefix = `${this.base}.reply.`
  }

  /** The subject only the minion `id` subscribes to. */
  minion(id: string): string {
    return PLAIN_ID.test(id) && id.length <= 255 ? `${this.base}.pub.m.${id}` : `${this.base}.pub.x.${Buffer.from(id).toString('base64url')}`
  }

  /** A reply subject a request server may answer on: one of this service's client inboxes, nothing else. */
  isReplySubject(subject: string | undefined): subject is string {
    return subject !== undefined && subject.startsWith(this.replyPrefix) && TOKEN.test(subject.slice(this.replyPrefix.length))
  }
}
