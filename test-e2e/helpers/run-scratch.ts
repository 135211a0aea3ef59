// vitest globalSetup of the e2e project: one scratch directory per test run, which files running in different
// workers use to share what is costly to make once (the packed tarballs: helpers/tarballs.ts). Removed after the run.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestProject } from 'vitest/node'

declare module 'vitest' {
  export interface ProvidedContext {
    runScratch: string
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = await mkdtemp(join(tmpdir(), 'brine-e2e-run-'))
  project.provide('runScratch', dir)
  return () => rm(dir, { recursive: true, force: true })
}
