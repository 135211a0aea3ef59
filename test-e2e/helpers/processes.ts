import { fileURLToPath } from 'node:url'
import { killAllProcesses, runProcess, type RunResult } from '@brine/testkit'

/** The repository's root: where e2e tests run npm scripts and the demo from. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** The test kit's bounded `runProcess`, run from the repository's root unless told otherwise. */
export function run(command: string, args: string[], options: { ms: number; cwd?: string; env?: NodeJS.ProcessEnv }): Promise<RunResult> {
  return runProcess(command, args, { ...options, cwd: options.cwd ?? REPO_ROOT })
}

/** Kills (by pid) every process the test kit started in this file. */
export const killAll = killAllProcesses
