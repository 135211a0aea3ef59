import { useEffect, useMemo, useState } from 'preact/hooks'
import { run, type Session } from '../api.js'
import { JobRows, type ReturnData } from '../lib/job-rows.js'
import { renderNested } from '../lib/nested.js'
import { isMap, Output, Problem, usePager } from '../ui.js'

type JobSummary = Record<string, unknown>

/** jobs.list_jobs, searched by function and target globs (Salt's search_function / search_target), newest first. */
export function JobsPage({ session }: { session: Session }) {
  const [jobs, setJobs] = useState<Array<[string, JobSummary]> | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [search, setSearch] = useState({ fun: '', target: '' })
  const load = (event?: Event): void => {
    event?.preventDefault()
    setError(undefined)
    const chunk: Record<string, unknown> = { client: 'runner', fun: 'jobs.list_jobs' }
    if (search.fun.trim() !== '') chunk['search_function'] = search.fun.trim()
    if (search.target.trim() !== '') chunk['search_target'] = search.target.trim()
    run(session, chunk).then(
      (answer) => setJobs(Object.entries(isMap(answer) ? (answer as Record<string, JobSummary>) : {}).sort(([a], [b]) => (a < b ? 1 : -1))),
      setError,
    )
  }
  useEffect(load, [session])
  const { offset, size, pager } = usePager(jobs?.length ?? 0, 50)
  return (
    <section>
      <h1>Jobs</h1>
      <form class="toolbar" onSubmit={load}>
        <input
          placeholder="function glob (test.*)"
          value={search.fun}
          onInput={(event) => setSearch({ ...search, fun: (event.target as HTMLInputElement).value })}
          aria-label="search function"
        />
        <input
          placeholder="target glob"
          value={search.target}
          onInput={(event) => setSearch({ ...search, target: (event.target as HTMLInputElement).value })}
          aria-label="search target"
        />
        <button type="submit">Search</button>
        <span class="count">{jobs === undefined ? 'loading…' : `${jobs.length} jobs`}</span>
      </form>
      <Problem error={error} session={session} />
      <table class="jobs">
        <thead>
          <tr>
            <th>Jid</th>
            <th>Started</th>
            <th>User</th>
            <th>Function</th>
            <th>Target</th>
            <th>Arguments</th>
          </tr>
        </thead>
        <tbody>
          {(jobs ?? []).slice(offset, offset + size).map(([jid, job]) => (
            <tr key={jid} data-jid={jid}>
              <td>
                <a href={`#/jobs/${jid}`}>{jid}</a>
              </td>
              <td>{String(job['StartTime'] ?? '')}</td>
              <td>{String(job['User'] ?? '')}</td>
              <td>{String(job['Function'] ?? '')}</td>
              <td>
                {JSON.stringify(job['Target'])} ({String(job['Target-type'] ?? 'glob')})
              </td>
              <td>
                <code>{JSON.stringify(job['Arguments'] ?? [])}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {pager}
    </section>
  )
}

/** One job: who ran what where, every minion's return, and the minions that did not return. */
export function JobPage({ session, jid }: { session: Session; jid: string }) {
  const [info, setInfo] = useState<Record<string, unknown> | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [raw, setRaw] = useState(false)
  useEffect(() => {
    run(session, { client: 'runner', fun: 'jobs.list_job', jid }).then((answer) => setInfo(isMap(answer) ? answer : {}), setError)
  }, [session, jid])
  const rows = useMemo(() => {
    if (info === undefined) return undefined
    const made = new JobRows(Array.isArray(info['Minions']) ? (info['Minions'] as string[]) : [])
    const result = isMap(info['Result']) ? info['Result'] : {}
    for (const [id, entry] of Object.entries(result)) if (isMap(entry)) made.applyReturn({ id, ...(entry as Omit<ReturnData, 'id'>) }, 'cache')
    made.expire()
    return made
  }, [info])
  const { offset, size, pager } = usePager(rows?.size ?? 0, 200)
  return (
    <section>
      <h1>
        <a href="#/jobs">Jobs</a> / {jid}
      </h1>
      <Problem error={error} session={session} />
      {info !== undefined && info['Function'] === undefined && <p class="problem">No job {jid} in the job cache.</p>}
      {info !== undefined && info['Function'] !== undefined && (
        <dl class="job-info">
          <dt>User</dt>
          <dd data-field="user">{String(info['User'])}</dd>
          <dt>Function</dt>
          <dd data-field="function">{String(info['Function'])}</dd>
          <dt>Target</dt>
          <dd>
            {JSON.stringify(info['Target'])} ({String(info['Target-type'] ?? 'glob')})
          </dd>
          <dt>Arguments</dt>
          <dd>
            <code>{JSON.stringify(info['Arguments'] ?? [])}</code>
          </dd>
          <dt>Started</dt>
          <dd>{String(info['StartTime'] ?? '')}</dd>
        </dl>
      )}
      {rows !== undefined && (
        <>
          <p class="counts">
            {rows.counts.returned} returned · {rows.counts.failed} failed · {rows.counts['did not return']} did not return
            <label class="toggle">
              <input type="checkbox" checked={raw} onChange={() => setRaw(!raw)} /> raw JSON
            </label>
          </p>
          <table class="returns">
            <tbody>
              {rows.page(offset, size).map((row) => (
                <tr key={row.id} data-minion={row.id} data-state={row.state}>
                  <td class="id">{row.id}</td>
                  <td class={`state ${row.state.replace(/ /g, '-')}`}>{row.state}</td>
                  <td>{row.state === 'did not return' ? null : <Output text={renderNested(row.ret)} json={row.ret} raw={raw} />}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {pager}
        </>
      )}
    </section>
  )
}
