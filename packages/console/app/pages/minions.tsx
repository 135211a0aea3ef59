import { useEffect, useMemo, useState } from 'preact/hooks'
import { run, wheel, type Session } from '../api.js'
import { minionMatches, parseMinionFilter } from '../lib/glob.js'
import { lastJobs, targetNames } from '../lib/targets.js'
import { renderNested } from '../lib/nested.js'
import { isMap, Output, Problem, usePager } from '../ui.js'

interface MinionRow {
  id: string
  up: boolean | undefined
  grains: Record<string, unknown>
  lastJob: string | undefined
}

const GRAINS = ['os', 'osrelease', 'kernel', 'ipv4']

/** Accepted keys, manage.status and a few grains, each fetched on its own so one refusal hides only its column. */
async function loadMinions(session: Session, setError: (error: unknown) => void): Promise<MinionRow[]> {
  const [keys, status, grains, jobs] = await Promise.allSettled([
    wheel(session, 'key.list_all'),
    run(session, { client: 'runner', fun: 'manage.status' }),
    run(session, { client: 'local', tgt: '*', fun: 'grains.item', arg: GRAINS }),
    run(session, { client: 'runner', fun: 'jobs.list_jobs' }),
  ])
  const failed = [keys, status, grains].find((result) => result.status === 'rejected')
  if (failed !== undefined) setError((failed as PromiseRejectedResult).reason)
  const byId = grains.status === 'fulfilled' && isMap(grains.value) ? grains.value : {}
  const accepted =
    keys.status === 'fulfilled' && isMap(keys.value) && Array.isArray(keys.value['minions']) ? (keys.value['minions'] as string[]) : Object.keys(byId)
  const up = status.status === 'fulfilled' && isMap(status.value) ? new Set(status.value['up'] as string[]) : undefined
  const last =
    jobs.status === 'fulfilled' && isMap(jobs.value) ? lastJobs(jobs.value as Record<string, Record<string, unknown>>, accepted) : new Map<string, string>()
  return [...accepted]
    .sort()
    .map((id) => ({ id, up: up === undefined ? undefined : up.has(id), grains: isMap(byId[id]) ? byId[id] : {}, lastJob: last.get(id) }))
}

export function MinionsPage({ session }: { session: Session }) {
  const [rows, setRows] = useState<MinionRow[] | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [filter, setFilter] = useState('')
  const refresh = (): void => {
    setError(undefined)
    loadMinions(session, setError).then(setRows, setError)
  }
  useEffect(refresh, [session])
  const parsed = useMemo(() => parseMinionFilter(filter), [filter])
  const shown = useMemo(() => (rows ?? []).filter((row) => minionMatches(parsed, row.id, row.grains)), [rows, parsed])
  const { offset, size, pager } = usePager(shown.length, 100)
  return (
    <section>
      <h1>Minions</h1>
      <div class="toolbar">
        <input
          placeholder="filter: id glob, or grain:glob (os:Debian*)"
          value={filter}
          onInput={(event) => setFilter((event.target as HTMLInputElement).value)}
          aria-label="filter"
        />
        <button type="button" onClick={refresh}>
          Refresh
        </button>
        <span class="count">{rows === undefined ? 'loading…' : `${shown.length} of ${rows.length} accepted`}</span>
      </div>
      <Problem error={error} session={session} />
      <table class="minions">
        <thead>
          <tr>
            <th>Minion</th>
            <th>Status</th>
            <th>OS</th>
            <th>Kernel</th>
            <th>IPv4</th>
            <th>Last job</th>
          </tr>
        </thead>
        <tbody>
          {shown.slice(offset, offset + size).map((row) => (
            <tr key={row.id} data-minion={row.id}>
              <td>
                <a href={`#/minions/${encodeURIComponent(row.id)}`}>{row.id}</a>
              </td>
              <td class={row.up === undefined ? 'state' : row.up ? 'state up' : 'state down'}>{row.up === undefined ? '?' : row.up ? 'up' : 'down'}</td>
              <td class="os">{[row.grains['os'], row.grains['osrelease']].filter((part) => part !== undefined && part !== '').join(' ')}</td>
              <td>{String(row.grains['kernel'] ?? '')}</td>
              <td>{Array.isArray(row.grains['ipv4']) ? (row.grains['ipv4'] as string[]).filter((ip) => ip !== '127.0.0.1').join(', ') : ''}</td>
              <td class="last-job">{row.lastJob === undefined ? '' : <a href={`#/jobs/${row.lastJob}`}>{row.lastJob}</a>}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {pager}
    </section>
  )
}

/** One minion: all its grains, and the jobs that named it in their target. */
export function MinionPage({ session, id }: { session: Session; id: string }) {
  const [grains, setGrains] = useState<unknown>(undefined)
  const [jobs, setJobs] = useState<Array<[string, Record<string, unknown>]>>([])
  const [error, setError] = useState<unknown>(undefined)
  const [raw, setRaw] = useState(false)
  useEffect(() => {
    run(session, { client: 'local', tgt: id, tgt_type: 'list', fun: 'grains.items' }).then(
      (answer) => setGrains(isMap(answer) ? answer[id] : undefined),
      setError,
    )
    run(session, { client: 'runner', fun: 'jobs.list_jobs' }).then(
      (answer) => {
        if (!isMap(answer)) return
        const mine = Object.entries(answer as Record<string, Record<string, unknown>>).filter(([, job]) => targetNames(job, id))
        setJobs(mine.sort(([a], [b]) => (a < b ? 1 : -1)).slice(0, 20))
      },
      () => undefined,
    )
  }, [session, id])
  return (
    <section>
      <h1>
        <a href="#/minions">Minions</a> / {id}
      </h1>
      <Problem error={error} session={session} />
      <h2>Recent jobs</h2>
      <ul class="recent">
        {jobs.map(([jid, job]) => (
          <li key={jid}>
            <a href={`#/jobs/${jid}`}>{jid}</a> {String(job['Function'])} ({String(job['User'])})
          </li>
        ))}
      </ul>
      <h2>
        Grains{' '}
        <label class="toggle">
          <input type="checkbox" checked={raw} onChange={() => setRaw(!raw)} /> raw JSON
        </label>
      </h2>
      {grains === undefined ? <p>loading…</p> : <Output text={renderNested(grains)} json={grains} raw={raw} />}
    </section>
  )
}
