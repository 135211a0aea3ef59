import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vite'

// The console's build: app/ → dist/app/, relative asset URLs (it is served under whatever app_path is),
// hashed file names under assets/ (served as immutable), no inline scripts (the CSP allows none).
export default defineConfig({
  root: fileURLToPath(new URL('./app', import.meta.url)),
  base: './',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('./dist/app', import.meta.url)),
    emptyOutDir: true,
    assetsDir: 'assets',
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: 'es2022',
  },
})
