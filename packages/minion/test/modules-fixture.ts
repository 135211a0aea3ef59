/** Shared set-up for the execution-module tests: a registry over a fresh job table. */
import { readFileSync } from 'node:fs'
import { silentLogger } from '@brine/core'
import { executeJob } from '../src/executor.js'
import type { ExecuteOptions, JobRequest, JobResult } from '../src/executor.js'
import { createModuleRegistry } from '../src/modules/registry.js'
import { RunningJobs } from '../src/modules/running-jobs.js'
import type { Grains, MinionOpts, ModuleDefinition, ModuleRegistry } from '../src/modules/types.js'

export interface Fixture {
  registry: ModuleRegistry
  jobs: RunningJobs
  grains: Grains
  /** Runs `fun` as a job with a fresh jid. */
  run(fun: string, arg?: unknown[], extra?: Partial<JobRequest>, options?: ExecuteOptions): Promise<JobResult>
  /** Starts a job without waiting; returns its jid and the pending result. */
  start(fun: string, arg?: unknown[]): { jid: string; result: Promise<JobResult> }
}

let counter = 0
export const nextJid = (): string => `20240101000000${String(++counter).padStart(6, '0')}`

export function makeFixture(opts: MinionOpts = {}, extra: Record<string, ModuleDefinition> = {}, grains: Grains = { id: 'minion-1', os: 'Debian' }): Fixture {
  const jobs = new RunningJobs()
  const registry = createModuleRegistry({ id: 'minion-1', grains, opts, logger: silentLogger, jobs }, extra)
  const run: Fixture['run'] = (fun, arg = [], extraFields = {}, options = {}) => executeJob(registry, { jid: nextJid(), fun, arg, ...extraFields }, options)
  const start: Fixture['start'] = (fun, arg = []) => {
    const jid = nextJid()
    return { jid, result: executeJob(registry, { jid, fun, arg }) }
  }
  return { registry, jobs, grains, run, start }
}

/** Bounds a wait; fails naming what it waited for. */
export async function deadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * True while a process with this pid is alive. A zombie counts as dead: in a container whose
 * pid 1 does not reap, an orphan killed by us stays a zombie.
 */
export function processExists(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    return false
  }
}
