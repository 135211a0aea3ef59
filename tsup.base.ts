import { defineConfig, type Options } from 'tsup'

const common: Options = { format: ['esm'], sourcemap: true, target: 'node20' }

/**
 * Every package's build: ESM + .d.ts from `src/index.ts` (plus `extraEntries`, e.g. a worker script started by
 * path), and, for packages with command-line programs, one shebang'd file per bin under `dist/bin/`.
 */
export function packageConfig(options: { extraEntries?: string[]; bins?: Record<string, string> } = {}) {
  const library: Options = { ...common, entry: ['src/index.ts', ...(options.extraEntries ?? [])], dts: true, clean: true }
  if (options.bins === undefined) return defineConfig(library)
  const bins: Options = {
    ...common,
    entry: Object.fromEntries(Object.entries(options.bins).map(([name, source]) => [`bin/${name}`, source])),
    clean: false,
    banner: { js: '#!/usr/bin/env node' },
  }
  return defineConfig([library, bins])
}
