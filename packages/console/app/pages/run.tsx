import { useEffect, useMemo, useRef, useState } from 'preact/hooks'
import { run, wheel, type EventHub, type Session } from '../api.js'
import { parseArgs, splitWords } from '../lib/args.js'
import { globToRegExp } from '../lib/glob.js'
import { brineCommand, TARGET_TYPES, type RunRequest, type TargetType } from '../lib/command.js'
import { JobRows, type ReturnData } from '../lib/job-rows.js'
import { renderNested } from '../lib/nested.js'
import { isMap, Output, Problem, usePager } from '../ui.js'

/** How long the page waits for returns before it asks the job cache and calls the rest missing, ms. */
const WAIT_MS = 30_000

/**
 * One minion to ask for function names and docs: for a glob, the first accepted key it matches (so a
 * 1,000-minion target costs one small call); otherwise the target itself.
 */
async function oneMinionOf(session: Session, request: RunRequest): Promise<{ tgt: string | string[]; tgt_type: string }> {
  if (request.tgtType === 'glob') {
    try {
      const keys = await wheel(session, 'key.list_all')
      const accepted = isMap(keys) && Array.isArray(keys['minions']) ? (keys['minions'] as string[]) : []
      const pattern = globToRegExp(request.tgt)
      const first = accepted.find((id) => pattern.test(id))
      if (first !== undefined) return { tgt: [first], tgt_type: 'list' }
    } catch {
      // No right to list keys: ask the target as typed.
    }
  }
  return { tgt: request.tgt, tgt_type: request.tgtType }
}

/** Function names for completion and the doc of the chosen one, asked of one minion the target matches. */
function useFunctionHelp(session: Session, request: RunRequest): { names: string[]; doc: string; load: () => void } {
  const [names, setNames] = useState<string[]>([])
  const [doc, setDoc] = useState('')
  const [asked, setAsked] = useState<{ tgt: string | string[]; tgt_type: string } | undefined>(undefined)
  const load = (): void => {
    if (names.length > 0) return
    void oneMinionOf(session, request)
      .then((target) => {
        setAsked(target)
        return run(session, { client: 'local', ...target, fun: 'sys.list_functions' })
      })
      .then(
        (answer) => {
          const first = isMap(answer) ? Object.values(answer).find(Array.isArray) : undefined
          if (first !== undefined) setNames((first as string[]).slice().sort())
        },
        () => undefined,
      )
  }
  useEffect(() => {
    if (!names.includes(request.fun) || asked === undefined) return setDoc('')
    run(session, { client: 'local', ...asked, fun: 'sys.doc', arg: [request.fun] }).then(
      (answer) => {
        const first = isMap(answer) ? Object.values(answer).find(isMap) : undefined
        setDoc(first === undefined ? '' : String(first[request.fun] ?? ''))
      },
      () => setDoc(''),
    )
  }, [request.fun, names, asked])
  return { names, doc, load }
}

interface Running {
  jid: string
  rows: JobRows
}

/** The job's fields: target and its type, function (with completion), arguments, batch size, async. */
function RunForm({
  request,
  setRequest,
  help,
  onSubmit,
}: {
  request: RunRequest
  setRequest: (request: RunRequest) => void
  help: ReturnType<typeof useFunctionHelp>
  onSubmit: (event: Event) => void
}) {
  const field =
    <K extends keyof RunRequest>(key: K) =>
    (event: Event) => {
      const target = event.target as HTMLInputElement
      setRequest({ ...request, [key]: target.type === 'checkbox' ? target.checked : target.value })
    }
  return (
    <form class="run" onSubmit={onSubmit}>
      <label>
        Target <input name="tgt" value={request.tgt} onInput={field('tgt')} required />
      </label>
      <label>
        Target type
        <select
          name="tgt_type"
          value={request.tgtType}
          onChange={(event) => setRequest({ ...request, tgtType: (event.target as HTMLSelectElement).value as TargetType })}
        >
          {TARGET_TYPES.map((type) => (
            <option value={type}>{type}</option>
          ))}
        </select>
      </label>
      <label>
        Function <input name="fun" list="functions" value={request.fun} onFocus={help.load} onInput={field('fun')} required />
        <datalist id="functions">
          {help.names.map((name) => (
            <option value={name} />
          ))}
        </datalist>
      </label>
      <label class="wide">
        Arguments (words; key=value for keyword arguments) <input name="args" value={request.args} onInput={field('args')} />
      </label>
      <label>
        Batch size <input name="batch" placeholder="e.g. 10 or 25%" value={request.batch} onInput={field('batch')} />
      </label>
      <label class="check">
        <input type="checkbox" name="async" checked={request.async} onChange={field('async')} /> async (return the jid only)
      </label>
      <button type="submit">Run</button>
    </form>
  )
}

export function RunPage({ session, hub }: { session: Session; hub: EventHub }) {
  const [request, setRequest] = useState<RunRequest>({ tgt: '*', tgtType: 'glob', fun: 'test.ping', args: '', async: false, batch: '' })
  const [error, setError] = useState<unknown>(undefined)
  const [started, setStarted] = useState<string | undefined>(undefined)
  const [batch, setBatch] = useState<Running | undefined>(undefined)
  const [raw, setRaw] = useState(false)
  const live = useLiveReturns(session, hub)
  const job = batch ?? live.job
  const help = useFunctionHelp(session, request)
  const command = useMemo(() => brineCommand(request, splitWords), [request])
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault()
    setError(undefined)
    setStarted(undefined)
    setBatch(undefined)
    live.clear()
    const { arg, kwarg } = parseArgs(request.args)
    const chunk = { tgt: request.tgt, tgt_type: request.tgtType, fun: request.fun, arg, kwarg }
    try {
      if (request.batch.trim() !== '') return showBatch(await run(session, { ...chunk, client: 'local_batch', batch: request.batch.trim() }))
      const follow = request.async ? undefined : live.watch()
      const answer = (await run(session, { ...chunk, client: 'local_async' })) as { jid?: string; minions?: string[] }
      if (answer?.jid === undefined) throw new Error(`no minion matched ${request.tgtType} target ${request.tgt}`)
      setStarted(answer.jid)
      follow?.(answer.jid, answer.minions ?? [])
    } catch (failure) {
      setError(failure)
    }
  }
  const showBatch = (answer: unknown): void => {
    const items = Array.isArray(answer) ? (answer as Array<Record<string, unknown>>) : []
    const rows = new JobRows([])
    for (const item of items)
      for (const [id, ret] of Object.entries(item))
        rows.applyReturn(ret === false ? { id, success: false, return: 'Minion did not return' } : { id, return: ret })
    setBatch({ jid: 'batch', rows })
  }
  return (
    <section>
      <h1>Run</h1>
      <RunForm request={request} setRequest={setRequest} help={help} onSubmit={submit} />
      <p class="command">
        <code data-testid="brine-command">{command}</code>{' '}
        <button type="button" onClick={() => void navigator.clipboard?.writeText(command)}>
          Copy as brine command
        </button>
      </p>
      {help.doc !== '' && <pre class="doc">{help.doc}</pre>}
      <Problem error={error} session={session} />
      {started !== undefined && (
        <p class="started">
          Job <a href={`#/jobs/${started}`}>{started}</a> started.
        </p>
      )}
      {job !== undefined && <JobView job={job} raw={raw} setRaw={setRaw} version={live.version} />}
    </section>
  )
}

/** The job cache's returns of `jid` (for what the stream missed), then the rest did not return. */
async function catchUp(session: Session, jid: string, rows: JobRows): Promise<void> {
  try {
    const info = await run(session, { client: 'runner', fun: 'jobs.list_job', jid })
    const result = isMap(info) && isMap(info['Result']) ? info['Result'] : {}
    for (const [id, entry] of Object.entries(result))
      if (isMap(entry) && rows.stateOf(id) === 'waiting') rows.applyReturn({ id, ...(entry as Omit<ReturnData, 'id'>) }, 'cache')
  } finally {
    rows.expire()
  }
}

/** Returns seen before the jid is known (a fast minion answers before local_async does), bounded. */
const EARLY_LIMIT = 20_000

/**
 * Watches the event stream for one job's returns from before it is sent, so none is missed: returns are
 * held until the jid is known, then fed into the rows; the page re-renders at most once a frame.
 */
function useLiveReturns(
  session: Session,
  hub: EventHub,
): { watch: () => (jid: string, minions: string[]) => Running; clear: () => void; job: Running | undefined; version: number } {
  const [job, setJob] = useState<Running | undefined>(undefined)
  const [version, setVersion] = useState(0)
  const stop = useRef<() => void>(() => {})
  const frame = useRef<number | undefined>(undefined)
  useEffect(() => () => stop.current(), [])
  const bump = (): void => {
    if (frame.current !== undefined) return
    frame.current = requestAnimationFrame(() => {
      frame.current = undefined
      setVersion((value) => value + 1)
    })
  }
  const watch = () => {
    stop.current()
    setJob(undefined)
    const early: Array<{ jid: string; data: ReturnData }> = []
    let current: Running | undefined
    const unsubscribe = hub.subscribe((event) => {
      const match = /^salt\/job\/([^/]+)\/ret\//.exec(event.tag)
      if (match === null) return
      const data = event.data as unknown as ReturnData
      if (current === undefined) {
        if (early.length < EARLY_LIMIT) early.push({ jid: match[1]!, data })
      } else if (match[1] === current.jid) {
        current.rows.applyReturn(data)
        bump()
      }
    })
    let timer: ReturnType<typeof setTimeout> | undefined
    stop.current = () => {
      unsubscribe()
      clearTimeout(timer)
    }
    return (jid: string, minions: string[]): Running => {
      const rows = new JobRows(minions)
      for (const item of early) if (item.jid === jid) rows.applyReturn(item.data)
      current = { jid, rows }
      early.length = 0
      timer = setTimeout(() => void catchUp(session, jid, rows).finally(bump), WAIT_MS)
      setJob(current)
      return current
    }
  }
  const clear = (): void => {
    stop.current()
    stop.current = () => {}
    setJob(undefined)
  }
  return { watch, clear, job, version }
}

function JobView({ job, raw, setRaw }: { job: Running; raw: boolean; setRaw: (raw: boolean) => void; version: number }) {
  const { counts } = job.rows
  const { offset, size, pager } = usePager(job.rows.size, 200)
  return (
    <div class="job">
      <p class="counts" data-testid="counts">
        {counts.returned} returned · {counts.failed} failed · {counts.waiting} waiting · {counts['did not return']} did not return
        <label class="toggle">
          <input type="checkbox" checked={raw} onChange={() => setRaw(!raw)} /> raw JSON
        </label>
      </p>
      <table class="returns">
        <tbody>
          {job.rows.page(offset, size).map((row) => (
            <tr key={row.id} data-minion={row.id} data-state={row.state} data-via={row.via}>
              <td class="id">{row.id}</td>
              <td class={`state ${row.state.replace(/ /g, '-')}`}>
                {row.state}
                {row.retcode !== undefined && row.retcode !== 0 ? ` (retcode ${row.retcode})` : ''}
              </td>
              <td>{row.state === 'returned' || row.state === 'failed' ? <Output text={renderNested(row.ret)} json={row.ret} raw={raw} /> : null}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {pager}
    </div>
  )
}
