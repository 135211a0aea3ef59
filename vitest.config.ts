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
    globalSetup: [`${root}scripts/vitest-runtime.ts`],
    retry: 0,
    // The longest files first, over every project: see scripts/vitest-sequencer.ts.
    sequence: { sequencer: LongestFirstSequencer },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores, four workers: an e2e file keeps about half a core busy (the rest is Salt's timeouts and process
    // start-ups), so fewer workers left a core idle part of the time; more would have the wire tests' real processes
    // starve each other.
    maxWorkers: 4,
    projects: [
      // Every package's unit and compliance files, one project whose files share their workers (`isolate: false`):
      // vitest hands a finished worker the next file only when that file is of the same project and not isolated, and
      // a fresh worker per file paid Node's start and the evaluation of every module the file imports, most of a
      // small file's CPU. So a file must leave the process as it found it (timers, registries, mocks, environment).
      // One package's files: `npx vitest run packages/<name>/`.
      { extends: true, test: { name: 'packages', isolate: false, include: ['packages/*/test/**/*.test.ts'] } },
      // The two files that install Debian packages (deb, host-modules) take turns through helpers/host-lock.ts.
      // The e2e files share a scratch directory per run (helpers/run-scratch.ts, added to the root's globalSetup).
      { extends: true, test: { name: 'e2e', include: ['test-e2e/**/*.test.ts'], globalSetup: [`${root}test-e2e/helpers/run-scratch.ts`] } },
    ],
  },
})
