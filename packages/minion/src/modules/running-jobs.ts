/**
 * The minion's table of jobs in flight: what Salt keeps as files under `<cachedir>/proc` and
 * reads back for saltutil.running, find_job and kill_job. Here it is memory, because jobs run in
 * this process; a job's entry lives exactly as long as its function runs.
 */

/** Salt's proc-file shape: the publish load plus the pid running it. */
export interface RunningJobInfo {
  jid: string
  fun: string
  arg: unknown[]
  pid: number
  /** When the job started, ISO 8601 (Salt stamps events the same way). */
  _stamp: string
  tgt?: unknown
  tgt_type?: string
  user?: string
  ret?: string
  /** Child processes the job started (cmd.run), as Salt lists where psutil is missing. */
  child_pids?: number[]
  [key: string]: unknown
}

/** Stops a running job; the reason is what its abort signal carries. */
export type AbortJob = (reason: unknown) => void

/** What a running job is registered with: its publish load (the rest of {@link RunningJobInfo} is added when listed). */
export interface RunningJobLoad {
  readonly jid: string
  readonly fun: string
  readonly arg?: readonly unknown[]
  readonly [key: string]: unknown
}

interface Entry {
  job: RunningJobLoad
  /** ms since the epoch. */
  startedAt: number
  abort: AbortJob
  children: Set<number> | undefined
}

export class RunningJobs {
  readonly #jobs = new Map<string, Entry>()

  /**
   * Adds a job; `abort` is called by {@link kill} and {@link abortAll}. Returns the function that removes it.
   * Its info (the load, pid and start stamp) is put together only when listed: most jobs never are.
   */
  register(job: RunningJobLoad, abort: AbortJob, startedAt: number = Date.now()): () => void {
    const entry: Entry = { job, startedAt, abort, children: undefined }
    const jid = job.jid
    this.#jobs.set(jid, entry)
    return () => {
      if (this.#jobs.get(jid) === entry) this.#jobs.delete(jid)
    }
  }

  /** Snapshots of every running job, oldest first. */
  list(): RunningJobInfo[] {
    return [...this.#jobs.values()].map((entry) => snapshot(entry))
  }

  get(jid: string): RunningJobInfo | undefined {
    const entry = this.#jobs.get(jid)
    return entry === undefined ? undefined : snapshot(entry)
  }

  get size(): number {
    return this.#jobs.size
  }

  addChild(jid: string, pid: number): void {
    const entry = this.#jobs.get(jid)
    if (entry !== undefined) (entry.children ??= new Set()).add(pid)
  }

  removeChild(jid: string, pid: number): void {
    this.#jobs.get(jid)?.children?.delete(pid)
  }

  /**
   * Aborts the job and signals its child process groups (they were spawned as group leaders).
   * Returns the job's info as it was, or undefined when no such job runs.
   */
  kill(jid: string, signal: NodeJS.Signals | number = 'SIGKILL'): RunningJobInfo | undefined {
    const entry = this.#jobs.get(jid)
    if (entry === undefined) return undefined
    const info = snapshot(entry)
    for (const pid of entry.children ?? []) {
      try {
        process.kill(-pid, signal)
      } catch {
        // The group is already gone; the job's own abort handler cleans up the rest.
      }
    }
    entry.abort(`signal ${String(signal)} sent by saltutil`)
    return info
  }

  /** Aborts every running job (the minion is stopping); their children are left to their abort handlers. */
  abortAll(reason: unknown): void {
    for (const entry of [...this.#jobs.values()]) entry.abort(reason)
  }
}

function snapshot(entry: Entry): RunningJobInfo {
  const { job } = entry
  const info: RunningJobInfo = {
    ...job,
    jid: job.jid,
    fun: job.fun,
    arg: [...(job.arg ?? [])],
    pid: process.pid,
    _stamp: new Date(entry.startedAt).toISOString(),
  }
  if (entry.children !== undefined && entry.children.size > 0) info.child_pids = [...entry.children]
  return info
}
