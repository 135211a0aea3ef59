import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { freeLoopbackPort, type DaemonProcess } from '@brine/testkit'
import { type Fleet } from '@brine/harness'
import { secondsFromMs } from '@brine/config'

/** What the REST API phase measures (issue 12's bench figures). */
export interface ApiFigures {
  /** `POST /` with `local` `test.ping` to every minion, one at a time, ms (HTTP on loopback, a keep-alive connection). */
  postMs: { count: number; min: number; median: number; p95: number; max: number }
  /** The same ping through the `brine` command line, each a new process, ms. */
  cliMs: { count: number; min: number; median: number; p95: number; max: number }
  /** Readers of `/events` during the throughput phase, and the job events they were delivered. */
  sse: { readers: number; durationMs: number; events: number; eventsPerSec: number; perReaderEventsPerSec: number; dropped: number }
  /** brine-api's RSS after the phase, bytes. */
  apiRssBytes: number
}

const USER = 'bench'
const PASSWORD = 'bench-password'

/**
 * Master config keys for a bench fleet that also runs brine-api: an eauth user allowed everything (a text
 * password file written under `dir`), the local client enabled, plain HTTP on a free loopback port.
 */
export async function apiMasterConfig(dir: string): Promise<Record<string, unknown>> {
  const file = join(dir, 'bench-users')
  await writeFile(file, `${USER}:${PASSWORD}\n`, { mode: 0o600 })
  return {
    external_auth: { file: { '^filename': file, [USER]: ['.*', '@runner', '@wheel'] } },
    netapi_enable_clients: ['local', 'local_async', 'runner'],
    rest_cherrypy: { port: await freeLoopbackPort(), host: '127.0.0.1', disable_ssl: true },
  }
}

function stats(values: readonly number[]): ApiFigures['postMs'] {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0
  const round = (v: number): number => Math.round(v * 10) / 10
  return { count: sorted.length, min: round(sorted[0] ?? 0), median: round(at(0.5)), p95: round(at(0.95)), max: round(sorted.at(-1) ?? 0) }
}

/** brine-api beside a bench fleet: logs in once, then times pings and counts streamed events. */
export class ApiProbe {
  readonly #fleet: Fleet
  #url = ''
  #token = ''
  #pid = 0
  #process: DaemonProcess | undefined
  #readers: Array<{ abort: AbortController; done: Promise<number>; seen: { events: number } }> = []
  /** When a reader last got a job event (performance.now()). */
  #lastEventAt = 0
  #streamStart = 0

  constructor(fleet: Fleet) {
    this.#fleet = fleet
  }

  async start(): Promise<void> {
    const { url, process } = await this.#fleet.startApi()
    this.#url = url
    this.#pid = process.pid
    this.#process = process
    const response = await fetch(`${url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: USER, password: PASSWORD, eauth: 'file' }),
    })
    if (response.status !== 200) throw new Error(`brine-api login answered ${response.status}: ${await response.text()}`)
    this.#token = response.headers.get('x-auth-token') ?? ''
  }

  get pid(): number {
    return this.#pid
  }

  /** Stops brine-api (its own fleet entry goes with it at the fleet's stop otherwise). */
  async stop(): Promise<void> {
    await this.#process?.stop('SIGTERM')
  }

  /** `calls` × POST / local test.ping '*': each must return every one of `n` minions. */
  async postLatency(calls: number, n: number, timeoutMs: number): Promise<ApiFigures['postMs']> {
    const times: number[] = []
    for (let index = 0; index < calls; index++) {
      const started = performance.now()
      const response = await fetch(`${this.#url}/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-auth-token': this.#token },
        body: JSON.stringify([{ client: 'local', tgt: '*', fun: 'test.ping', timeout: secondsFromMs(timeoutMs) }]),
        signal: AbortSignal.timeout(timeoutMs + 10_000),
      })
      const body = (await response.json()) as { return?: Array<Record<string, unknown>> }
      const answered = Object.values(body.return?.[0] ?? {}).filter((value) => value === true).length
      if (response.status !== 200 || answered !== n) throw new Error(`POST / test.ping: ${response.status}, ${answered}/${n} answered`)
      times.push(performance.now() - started)
    }
    return stats(times)
  }

  /** `calls` × `brine '*' test.ping` as processes (what an operator's script pays per call). */
  async cliLatency(calls: number, n: number): Promise<ApiFigures['cliMs']> {
    const times: number[] = []
    for (let index = 0; index < calls; index++) {
      const started = performance.now()
      const result = await this.#fleet.run('brine', ['*', 'test.ping', '--out', 'json', '--static'], { ms: 60_000 })
      const answered = result.code === 0 ? Object.keys(JSON.parse(result.stdout) as object).length : 0
      if (answered !== n) throw new Error(`brine '*' test.ping exited ${result.code} with ${answered}/${n}: ${result.stderr.slice(0, 200)}`)
      times.push(performance.now() - started)
    }
    return stats(times)
  }

  /** Opens `count` `/events` readers, each counting the job events it is delivered until stopped. */
  async openReaders(count: number): Promise<void> {
    this.#streamStart = performance.now()
    for (let index = 0; index < count; index++) {
      const abort = new AbortController()
      const response = await fetch(`${this.#url}/events?token=${this.#token}`, { signal: abort.signal })
      if (response.status !== 200 || response.body === null) throw new Error(`GET /events answered ${response.status}`)
      const reader = response.body.getReader()
      const decoder = new TextDecoder()
      const seen = { events: 0 }
      const done = (async () => {
        let carry = ''
        try {
          for (;;) {
            const { value, done: finished } = await reader.read()
            if (finished) break
            carry += decoder.decode(value, { stream: true })
            const lines = carry.split('\n')
            carry = lines.pop() ?? ''
            for (const line of lines) {
              if (line.startsWith('tag: salt/job/')) {
                seen.events++
                this.#lastEventAt = performance.now()
              }
            }
          }
        } catch {
          // Aborted by closeReaders.
        }
        return seen.events
      })()
      this.#readers.push({ abort, done, seen })
    }
  }

  /**
   * Lets the readers take what is still on its way (until each got `expected` events, or none got one for 300 ms
   * after that; at most 10 s), then stops them; the job events they got per second from their opening to the last
   * one, and the API's drops. The stream may lag the jobs: a reader still short of `expected` is waited for.
   */
  async closeReaders(expected: number): Promise<ApiFigures['sse']> {
    const giveUp = performance.now() + 10_000
    const behind = (): boolean => this.#readers.some((reader) => reader.seen.events < expected)
    while (performance.now() < giveUp && (behind() || performance.now() - this.#lastEventAt < 300)) await new Promise((resolve) => setTimeout(resolve, 50))
    const durationMs = Math.max(1, this.#lastEventAt - this.#streamStart)
    for (const reader of this.#readers) reader.abort.abort()
    const counts = await Promise.all(this.#readers.map((reader) => reader.done))
    const readers = this.#readers.length
    this.#readers = []
    const stats = (await (await fetch(`${this.#url}/stats`, { headers: { 'x-auth-token': this.#token } })).json()) as {
      'Brine API'?: { Events?: { dropped?: number } }
    }
    const events = counts.reduce((sum, value) => sum + value, 0)
    const round = (v: number): number => Math.round(v)
    return {
      readers,
      durationMs: round(durationMs),
      events,
      eventsPerSec: round(events / secondsFromMs(durationMs)),
      perReaderEventsPerSec: round(events / secondsFromMs(durationMs) / Math.max(1, readers)),
      dropped: stats['Brine API']?.Events?.dropped ?? 0,
    }
  }
}
