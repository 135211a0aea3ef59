import { packageConfig } from '../../tsup.base.js'

// request-worker.js is started by path (new Worker(new URL('./request-worker.js', import.meta.url))).
export default packageConfig({ extraEntries: ['src/request-worker.ts'] })
