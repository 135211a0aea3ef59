import { render } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { EventHub, loadSession, logout, saveSession, wheel, whenExpired, type Session } from './api.js'
import { LoginPage } from './pages/login.js'
import { MinionsPage, MinionPage } from './pages/minions.js'
import { RunPage } from './pages/run.js'
import { JobsPage, JobPage } from './pages/jobs.js'
import { KeysPage } from './pages/keys.js'
import { EventsPage } from './pages/events.js'
import './style.css'

const route = (): string[] => (location.hash.replace(/^#\/?/, '') || 'minions').split('/').map(decodeURIComponent)

function useRoute(): string[] {
  const [current, setCurrent] = useState(route())
  useEffect(() => {
    const changed = (): void => setCurrent(route())
    addEventListener('hashchange', changed)
    return () => removeEventListener('hashchange', changed)
  }, [])
  return current
}

/** How long the badge gathers key events before it asks for the key lists again, ms. */
const BADGE_REFRESH_MS = 500

/** The header's count of pending keys, refreshed when the bus says keys changed. */
function usePending(session: Session, hub: EventHub): number | undefined {
  const [pending, setPending] = useState<number | undefined>(undefined)
  useEffect(() => {
    const refresh = (): void => {
      wheel(session, 'key.list_all')
        .then((keys) => setPending(((keys as { minions_pre?: string[] })?.minions_pre ?? []).length))
        .catch(() => setPending(undefined))
    }
    refresh()
    // A pending minion re-authenticates every few seconds: one refresh per burst, not one per event.
    let timer: ReturnType<typeof setTimeout> | undefined
    const unsubscribe = hub.subscribe((event) => {
      if ((event.tag === 'salt/auth' || event.tag.startsWith('salt/key')) && timer === undefined) {
        timer = setTimeout(() => {
          timer = undefined
          refresh()
        }, BADGE_REFRESH_MS)
      }
    })
    return () => {
      unsubscribe()
      clearTimeout(timer)
    }
  }, [session, hub])
  return pending
}

const PAGES = [
  ['minions', 'Minions'],
  ['run', 'Run'],
  ['jobs', 'Jobs'],
  ['keys', 'Keys'],
  ['events', 'Events'],
] as const

function Shell({ session, hub, onLogout }: { session: Session; hub: EventHub; onLogout: () => void }) {
  const [page = 'minions', param] = useRoute()
  const [live, setLive] = useState(false)
  const pending = usePending(session, hub)
  useEffect(() => hub.start(setLive), [hub])
  let body
  if (page === 'minions' && param !== undefined) body = <MinionPage session={session} id={param} />
  else if (page === 'minions') body = <MinionsPage session={session} />
  else if (page === 'run') body = <RunPage session={session} hub={hub} />
  else if (page === 'jobs' && param !== undefined) body = <JobPage session={session} jid={param} />
  else if (page === 'jobs') body = <JobsPage session={session} />
  else if (page === 'keys') body = <KeysPage session={session} />
  else if (page === 'events') body = <EventsPage hub={hub} />
  else body = <p class="problem">No page {page}.</p>
  return (
    <>
      <header>
        <span class="brand">Brine</span>
        <nav>
          {PAGES.map(([name, label]) => (
            <a href={`#/${name}`} class={page === name ? 'current' : ''} data-page={name}>
              {label}
              {name === 'keys' && pending !== undefined && pending > 0 && (
                <span class="badge" title="pending keys" data-testid="pending-badge">
                  {pending}
                </span>
              )}
            </a>
          ))}
        </nav>
        <span class={live ? 'live on' : 'live'} title="event stream">
          {live ? 'live' : 'offline'}
        </span>
        <span class="who">
          {session.user} ({session.eauth})
        </span>
        <button type="button" onClick={onLogout}>
          Log out
        </button>
      </header>
      <main data-page={page}>{body}</main>
    </>
  )
}

function App() {
  const [session, setSession] = useState<Session | undefined>(loadSession())
  const [notice, setNotice] = useState<string | undefined>(undefined)
  const [hub, setHub] = useState<EventHub | undefined>(() => (session === undefined ? undefined : new EventHub(session)))
  const end = (message: string | undefined): void => {
    saveSession(undefined)
    setSession(undefined)
    setHub(undefined)
    setNotice(message)
  }
  useEffect(() => {
    whenExpired((message) => end(message))
  }, [])
  useEffect(() => {
    if (session === undefined) return undefined
    // The token's own expiry: back to login at that moment, not at the next click.
    const timer = setTimeout(() => end('Your session expired; please log in again.'), Math.max(0, session.expire * 1000 - Date.now()))
    return () => clearTimeout(timer)
  }, [session])
  useEffect(() => () => hub?.close(), [hub])
  if (session === undefined || hub === undefined) {
    return (
      <LoginPage
        notice={notice}
        onLogin={(made) => {
          saveSession(made)
          setNotice(undefined)
          setHub(new EventHub(made))
          setSession(made)
        }}
      />
    )
  }
  return (
    <Shell
      session={session}
      hub={hub}
      onLogout={() => {
        void logout(session)
        end('You logged out.')
      }}
    />
  )
}

render(<App />, document.getElementById('root') as HTMLElement)
