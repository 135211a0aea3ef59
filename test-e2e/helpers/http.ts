import { execFileSync } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** The key pair and certificate of {@link selfSignedCertificate}, made once per test file. */
let madeCertificate: { key: Buffer; crt: Buffer } | undefined

/**
 * A self-signed certificate for 127.0.0.1 and localhost made by openssl: `dir`/key.pem and `dir`/crt.pem; resolves with
 * the certificate. A file's describes (one API per transport) get copies of one: an RSA key pair is the costly part,
 * and no test tells two of them apart.
 */
export async function selfSignedCertificate(dir: string): Promise<Buffer> {
  if (madeCertificate === undefined) {
    const made = await mkdtemp(join(tmpdir(), 'brine-certificate-'))
    try {
      const subject = ['-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost']
      execFileSync(
        'openssl',
        ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(made, 'key.pem'), '-out', join(made, 'crt.pem'), '-days', '1', ...subject],
        { stdio: 'ignore' },
      )
      madeCertificate = { key: await readFile(join(made, 'key.pem')), crt: await readFile(join(made, 'crt.pem')) }
    } finally {
      await rm(made, { recursive: true, force: true })
    }
  }
  await writeFile(join(dir, 'key.pem'), madeCertificate.key, { mode: 0o600 })
  await writeFile(join(dir, 'crt.pem'), madeCertificate.crt)
  return madeCertificate.crt
}

/** The master's `external_auth` block for the htpasswd file at `dir`/htpasswd, with each user's ACL. */
export function htpasswdEauth(dir: string, acls: Record<string, unknown>): Record<string, unknown> {
  return { file: { '^filename': join(dir, 'htpasswd'), '^filetype': 'htpasswd', ...acls } }
}

/** A response as the tests read it: status, headers, the raw body, and the body parsed when it is JSON. */
export interface HttpResponse {
  status: number
  headers: IncomingHttpHeaders
  text: string
  raw: Buffer
  json: unknown
}

export interface HttpOptions {
  method?: string
  headers?: Record<string, string>
  body?: string | Buffer
  /** Bound on the whole exchange, ms. */
  ms?: number
  /** The local address to connect from (`127.0.0.2`: another client address on the loopback network). */
  localAddress?: string
}

/**
 * A real HTTP(S) client over node:http/node:https (no framework injection), trusting `ca` for the API's
 * self-signed certificate. Rejects naming the request when `ms` passes.
 */
export function httpClient(base: string, ca?: Buffer) {
  const url = new URL(base)
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest
  const call = (path: string, options: HttpOptions = {}): Promise<HttpResponse> =>
    new Promise((resolve, reject) => {
      const ms = options.ms ?? 60_000
      const headers: Record<string, string> = { ...options.headers }
      if (options.body !== undefined) headers['content-length'] = String(Buffer.byteLength(options.body))
      const req = send(
        {
          host: url.hostname,
          port: url.port,
          path,
          method: options.method ?? 'GET',
          headers,
          ...(ca === undefined ? {} : { ca }),
          ...(options.localAddress === undefined ? {} : { localAddress: options.localAddress }),
        },
        (res) => {
          const chunks: Buffer[] = []
          res.on('data', (chunk: Buffer) => chunks.push(chunk))
          res.on('end', () => {
            clearTimeout(timer)
            const raw = Buffer.concat(chunks)
            const text = raw.toString('utf8')
            let json: unknown
            try {
              json = JSON.parse(text)
            } catch {
              json = undefined
            }
            resolve({ status: res.statusCode ?? 0, headers: res.headers, text, raw, json })
          })
        },
      )
      const timer = setTimeout(() => {
        req.destroy()
        reject(new Error(`${options.method ?? 'GET'} ${path} got no full answer within ${ms} ms`))
      }, ms)
      req.on('error', (error) => {
        clearTimeout(timer)
        reject(error)
      })
      if (options.body !== undefined) req.write(options.body)
      req.end()
    })
  /** Opens a streaming GET (server-sent events); resolves with the response once the headers are in. */
  const stream = (path: string, headers: Record<string, string> = {}, ms = 30_000): Promise<IncomingMessage> =>
    new Promise((resolve, reject) => {
      const req = send(
        { host: url.hostname, port: url.port, path, method: 'GET', headers: { accept: 'text/event-stream', ...headers }, ...(ca === undefined ? {} : { ca }) },
        (res) => {
          clearTimeout(timer)
          resolve(res)
        },
      )
      const timer = setTimeout(() => {
        req.destroy()
        reject(new Error(`GET ${path} (event stream) got no headers within ${ms} ms`))
      }, ms)
      req.on('error', (error) => {
        clearTimeout(timer)
        reject(error)
      })
      req.end()
    })
  return { call, stream }
}

/** One server-sent event record: its fields (`tag`, `data`, `retry`) or a comment. */
export interface SseRecord {
  tag?: string
  data?: string
  retry?: string
  comment?: string
}

/**
 * Reads an event stream record by record. `next(predicate, ms, what)` resolves with the first record
 * (from the start of the stream) that matches and was not taken before; it fails naming `what` after `ms`,
 * or when the stream ends first. `ended` resolves when the server closes the stream.
 */
export class SseReader {
  readonly records: SseRecord[] = []
  readonly ended: Promise<void>
  #buffer = ''
  #taken = new Set<number>()
  #watchers = new Set<() => void>()
  #done = false

  constructor(readonly response: IncomingMessage) {
    response.setEncoding('utf8')
    response.on('data', (chunk: string) => {
      this.#buffer += chunk
      let end: number
      while ((end = this.#buffer.indexOf('\n\n')) >= 0) {
        const block = this.#buffer.slice(0, end)
        this.#buffer = this.#buffer.slice(end + 2)
        const record: SseRecord = {}
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) record.comment = `${record.comment === undefined ? '' : `${record.comment}\n`}${line.slice(1).trim()}`
          else {
            const colon = line.indexOf(':')
            const field = line.slice(0, colon)
            const value = line.slice(colon + 1).replace(/^ /, '')
            if (field === 'tag' || field === 'data' || field === 'retry') record[field] = value
          }
        }
        this.records.push(record)
      }
      for (const watcher of this.#watchers) watcher()
    })
    this.ended = new Promise((resolve) =>
      response.on('close', () => {
        this.#done = true
        for (const watcher of this.#watchers) watcher()
        resolve()
      }),
    )
  }

  next(predicate: (record: SseRecord) => boolean, ms: number, what: string): Promise<SseRecord> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        for (const [index, record] of this.records.entries()) {
          if (!this.#taken.has(index) && predicate(record)) {
            this.#taken.add(index)
            return finish(() => resolve(record))
          }
        }
        if (this.#done) finish(() => reject(new Error(`the event stream ended before ${what}`)))
      }
      const timer = setTimeout(() => finish(() => reject(new Error(`no ${what} on the event stream within ${ms} ms`))), ms)
      const finish = (settle: () => void): void => {
        clearTimeout(timer)
        this.#watchers.delete(check)
        settle()
      }
      this.#watchers.add(check)
      check()
    })
  }

  close(): void {
    this.response.destroy()
  }
}
