import { enableCompileCache } from '../compile-cache.js'

// The command's modules are imported once the compile cache is on, so they are loaded from it.
enableCompileCache()
const { runBin } = await import('../bin-runner.js')
const { runApi } = await import('../commands/api.js')
await runBin(runApi)
