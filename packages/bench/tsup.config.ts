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
    // The bench and the swarm run as `node dist/bin/<name>.js` (the fleet spawns brine-swarm by path).
    entry: { 'bin/brine-bench': 'src/bin/brine-bench.ts', 'bin/brine-swarm': 'src/bin/brine-swarm.ts' },
    format: ['esm'],
    sourcemap: true,
    clean: false,
    target: 'node20',
    banner: { js: '#!/usr/bin/env node' },
  },
])
