import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'
import LongestFirstSequencer from './scripts/vitest-sequencer.js'

const root = fileURLToPath(new URL('.', import.meta.url))

export default defineConfig({
  resolve: {
    // Unit and compliance tests run against each package's source, so they need no build.
    alias: [
      { find: /^@brine\/([a-z-]+)$/, replacement: `${root}packages/$1/src/index.ts` },
      // A package's second entry point (package.json `exports`).
      { find: /^@brine\/crypt\/root-key$/, replacement: `${root}packages/crypt/src/root-key-file.ts` },
    ],
  },
  test: {
    // The e2e files share a scratch directory per run (test-e2e/helpers/run-scratch.ts).
    globalSetup: [`${root}scripts/vitest-runtime.ts`, `${root}test-e2e/helpers/run-scratch.ts`],
    // Every package's unit and compliance files and every e2e file, one project whose files share their workers
    // (`isolate: false`): vitest hands a finished worker the next file only when that file is of the same project and
    // not isolated, and a fresh worker per file paid Node's start and the evaluation of every module the file imports,
    // most of a small file's CPU. One project rather than one for the packages and one for e2e: the longest-first
    // order mixes the two, and each change from one to the other at a worker's next file would start a fresh worker.
    // So a file must leave the process as it found it (timers, registries, mocks, environment, processes, ports):
    // scripts/vitest-file-guard.ts puts back what it can after each file. One package's files: `npx vitest run
    // packages/<name>/`; the e2e files: `npx vitest run test-e2e/`.
    include: ['packages/*/test/**/*.test.ts', 'test-e2e/**/*.test.ts'],
    isolate: false,
    setupFiles: [`${root}scripts/vitest-file-guard.ts`],
    retry: 0,
    // The longest files first: see scripts/vitest-sequencer.ts.
    sequence: { sequencer: LongestFirstSequencer },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores, four workers: an e2e file keeps about half a core busy (the rest is Salt's timeouts and process
    // start-ups), so fewer workers left a core idle part of the time; more would have the wire tests' real processes
    // starve each other. The two files that install Debian packages (deb, host-modules) take turns through
    // test-e2e/helpers/host-lock.ts.
    maxWorkers: 4,
  },
})
