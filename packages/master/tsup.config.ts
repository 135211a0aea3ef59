import { defineConfig } from 'tsup'

export default defineConfig({
  // request-worker.js is started by path (new Worker(new URL('./request-worker.js', import.meta.url))).
  entry: ['src/index.ts', 'src/request-worker.ts'],
  format: ['esm'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'node20',
})
