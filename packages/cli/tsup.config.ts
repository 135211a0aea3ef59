import { defineConfig } from 'tsup'

export default defineConfig([
  {
    entry: ['src/index.ts'],
    format: ['esm'],
    dts: true,
    sourcemap: true,
    clean: true,
    target: 'node20',
  },
  {
    // One file per bin, each runnable as `node dist/bin/brine.js` or through package.json "bin".
    entry: {
      'bin/brine': 'src/bin/brine.ts',
      'bin/brine-master': 'src/bin/brine-master.ts',
      'bin/brine-minion': 'src/bin/brine-minion.ts',
      'bin/brine-key': 'src/bin/brine-key.ts',
      'bin/brine-call': 'src/bin/brine-call.ts',
      'bin/brine-run': 'src/bin/brine-run.ts',
    },
    format: ['esm'],
    sourcemap: true,
    clean: false,
    target: 'node20',
    banner: { js: '#!/usr/bin/env node' },
  },
])
