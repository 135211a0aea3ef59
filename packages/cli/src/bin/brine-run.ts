import { enableCompileCache, importWithoutNativeMsgpack } from '../compile-cache.js'

// The command's modules are imported once the compile cache is on, so they are loaded from it.
enableCompileCache()
const { runBin, runRun } = await importWithoutNativeMsgpack(async () => ({
  ...(await import('../bin-runner.js')),
  ...(await import('../commands/run.js')),
}))
await runBin(runRun)
