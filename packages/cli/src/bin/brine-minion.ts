import { setFlagsFromString } from 'node:v8'
import { enableCompileCache, importWithoutNativeMsgpack } from '../compile-cache.js'

// An idle minion's largest avoidable cost is V8's young generation: module loading at start-up makes
// it grow its semi-spaces from 1 MiB to 4+ MiB and keep them (~6 MiB RSS, measured). A minion
// allocates little per job, so it keeps the initial size. Set before anything else is loaded (hence
// the dynamic imports below); `node --max-semi-space-size` cannot be used because the bin is also
// started as `node dist/bin/brine-minion.js`, which ignores the shebang.
setFlagsFromString('--semi-space-growth-factor=1')
enableCompileCache()

// A minion decodes a few small loads a job (the native extractor pays off only for many large ones), so, as a
// command does, it loads msgpackr without the addon and its loader modules.
const { runBin, runMinion } = await importWithoutNativeMsgpack(async () => ({
  ...(await import('../bin-runner.js')),
  ...(await import('../commands/daemon.js')),
}))
await runBin(runMinion)
