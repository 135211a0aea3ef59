/**
 * The console's only way to the server: salt-api's public REST endpoints and `/events`. The token is kept
 * as salt-api's browser clients keep it (sessionStorage, sent as X-Auth-Token; the event stream takes it as
 * `?token=`, because EventSource cannot send headers). A 401 ends the session and returns to login.
 */
export interface Session {
  token: string
  user: string
  eauth: string
  /** Epoch seconds. */
  expire: number
  /** The user's external_auth entries, as the master reported them at login. */
  perms: unknown
}

/** An answer other than 2xx: its status and salt-api's message. */
export class ApiFailure extends Error {
  override name = 'ApiFailure'
  constructor(
    readonly status: number,
    message: string,
    /** The master's ACL refused the call: a 401 as salt-api answers it, marked by brine-api's X-Brine-Refused header. */
    readonly refused = false,
  ) {
    super(message)
  }
}

const STORAGE_KEY = 'brine.console.session'

export function loadSession(): Session | undefined {
  const text = sessionStorage.getItem(STORAGE_KEY)
  if (text === null) return undefined
  try {
    const session = JSON.parse(text) as Session
    return session.expire * 1000 > Date.now() ? session : undefined
  } catch {
    return undefined
  }
}

export function saveSession(session: Session | undefined): void {
  if (session === undefined) sessionStorage.removeItem(STORAGE_KEY)
  else sessionStorage.setItem(STORAGE_KEY, JSON.stringify(session))
}

/** Called once when the server says the token is no longer good. */
let onExpired: (message: string) => void = () => {}
export function whenExpired(handler: (message: string) => void): void {
  onExpired = handler
}

async function request(path: string, init: RequestInit, token?: string): Promise<unknown> {
  const headers: Record<string, string> = { Accept: 'application/json', 'Content-Type': 'application/json' }
  if (token !== undefined) headers['X-Auth-Token'] = token
  let response: Response
  try {
    response = await fetch(path, { ...init, headers, credentials: 'same-origin' })
  } catch (error) {
    throw new ApiFailure(0, `brine-api is not reachable: ${(error as Error).message}`)
  }
  const text = await response.text()
  let body: unknown
  try {
    body = text === '' ? undefined : JSON.parse(text)
  } catch {
    body = text
  }
  if (response.ok) return body
  const message =
    typeof body === 'object' && body !== null && 'return' in body ? String((body as { return: unknown }).return) : `${response.status} ${response.statusText}`
  // An ACL refusal is a 401 too (salt-api's code); only a 401 that is not one means the session ended.
  const refused = response.status === 401 && response.headers.get('X-Brine-Refused') !== null
  if (response.status === 401 && !refused && token !== undefined) onExpired(`Your session ended: ${message}`)
  throw new ApiFailure(response.status, message, refused)
}

export async function login(username: string, password: string, eauth: string, tokenExpire?: number): Promise<Session> {
  const body: Record<string, unknown> = { username, password, eauth }
  if (tokenExpire !== undefined) body['token_expire'] = tokenExpire
  const answer = (await request('/login', { method: 'POST', body: JSON.stringify(body) })) as { return: Array<Session & { token: string }> }
  const first = answer.return[0]
  if (first === undefined) throw new ApiFailure(500, 'the login answer carried no token')
  return { token: first.token, user: first.user, eauth: first.eauth, expire: first.expire, perms: first.perms }
}

export async function logout(session: Session): Promise<void> {
  await request('/logout', { method: 'POST' }, session.token).catch(() => undefined)
}

/** Runs one lowstate chunk through `POST /` and returns its result (salt-api's `return[0]`). */
export async function run(session: Session, chunk: Record<string, unknown>): Promise<unknown> {
  const answer = (await request('/', { method: 'POST', body: JSON.stringify([chunk]) }, session.token)) as { return: unknown[] }
  return answer.return[0]
}

/** A wheel call's `data.return`, or its failure as an ApiFailure. */
export async function wheel(session: Session, fun: string, extra: Record<string, unknown> = {}): Promise<unknown> {
  const result = (await run(session, { client: 'wheel', fun, ...extra })) as { data?: { return?: unknown; success?: boolean } }
  if (result?.data?.success === false) throw new ApiFailure(500, String(result.data.return))
  return result?.data?.return
}

export interface BusEvent {
  tag: string
  data: Record<string, unknown>
}

type Listener = (event: BusEvent) => void

/** Events the hub remembers for a page opened later (the Events page starts with them). */
const RECENT = 500

/** The session's one event stream, shared by every page (one connection per tab). */
export class EventHub {
  readonly #listeners = new Set<Listener>()
  /** The last {@link RECENT} events, oldest first. */
  readonly recent: BusEvent[] = []
  #source: EventSource | undefined
  connected = false

  constructor(readonly session: Session) {}

  start(onState: (connected: boolean) => void): void {
    const source = new EventSource(`/events?token=${encodeURIComponent(this.session.token)}`)
    this.#source = source
    source.onopen = () => {
      this.connected = true
      onState(true)
    }
    source.onerror = () => {
      this.connected = false
      onState(false)
    }
    source.onmessage = (message: MessageEvent<string>) => {
      let event: BusEvent
      try {
        event = JSON.parse(message.data) as BusEvent
      } catch {
        return
      }
      this.recent.push(event)
      if (this.recent.length > RECENT) this.recent.shift()
      for (const listener of this.#listeners) listener(event)
    }
  }

  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  close(): void {
    this.#source?.close()
    this.#listeners.clear()
  }
}
