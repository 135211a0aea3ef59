import { useEffect, useMemo, useRef, useState } from 'preact/hooks'
import type { BusEvent, EventHub } from '../api.js'
import { globToRegExp } from '../lib/glob.js'

/** Events kept on the page; older ones scroll away (the list is a window, not a log). */
const KEEP = 500

interface Seen extends BusEvent {
  n: number
  at: string
}

/** The event's own time (the master's `_stamp`), else now; hh:mm:ss.mmm. */
function stampOf(event: BusEvent): string {
  const stamp = event.data?.['_stamp']
  const text = typeof stamp === 'string' ? stamp : new Date().toISOString()
  return text.slice(11, 23)
}

/** The master's bus, live: a tag filter (glob, or a substring), and pause (events while paused are counted, not shown). */
export function EventsPage({ hub }: { hub: EventHub }) {
  const counter = useRef(0)
  const [events, setEvents] = useState<Seen[]>(() => hub.recent.map((event) => ({ ...event, n: ++counter.current, at: stampOf(event) })).reverse())
  const [filter, setFilter] = useState('')
  const [paused, setPaused] = useState(false)
  const [missed, setMissed] = useState(0)
  const pausedRef = useRef(paused)
  pausedRef.current = paused
  useEffect(() => {
    // A burst (1,000 returns) lands in one render per frame, not one per event.
    let batch: Seen[] = []
    let frame: number | undefined
    const unsubscribe = hub.subscribe((event) => {
      if (pausedRef.current) {
        setMissed((value) => value + 1)
        return
      }
      batch.push({ ...event, n: ++counter.current, at: stampOf(event) })
      if (frame !== undefined) return
      frame = requestAnimationFrame(() => {
        frame = undefined
        const arrived = batch.reverse()
        batch = []
        setEvents((list) => [...arrived, ...list].slice(0, KEEP))
      })
    })
    return () => {
      unsubscribe()
      if (frame !== undefined) cancelAnimationFrame(frame)
    }
  }, [hub])
  const pattern = useMemo(() => {
    const text = filter.trim()
    if (text === '') return undefined
    return /[*?[]/.test(text) ? globToRegExp(text) : { test: (tag: string) => tag.includes(text) }
  }, [filter])
  const shown = pattern === undefined ? events : events.filter((event) => pattern.test(event.tag))
  return (
    <section>
      <h1>Events</h1>
      <div class="toolbar">
        <input
          placeholder="tag filter: salt/job/* or a substring"
          value={filter}
          onInput={(event) => setFilter((event.target as HTMLInputElement).value)}
          aria-label="tag filter"
        />
        <button
          type="button"
          onClick={() => {
            setPaused(!paused)
            if (paused) setMissed(0)
          }}
        >
          {paused ? 'Resume' : 'Pause'}
        </button>
        <span class="count">
          {shown.length} shown{paused ? ` · paused, ${missed} not shown` : ''}
        </span>
      </div>
      <table class="events">
        <tbody>
          {shown.map((event) => (
            <tr key={event.n}>
              <td class="at">{event.at}</td>
              <td class="tag">{event.tag}</td>
              <td>
                <code>{JSON.stringify(event.data).slice(0, 300)}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  )
}
