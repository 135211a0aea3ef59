import { packageConfig } from '../../tsup.base.js'

// One file per bin, each runnable as `node dist/bin/brine.js` or through package.json "bin".
export default packageConfig({
  bins: Object.fromEntries(
    ['brine', 'brine-master', 'brine-minion', 'brine-syndic', 'brine-key', 'brine-call', 'brine-run', 'brine-api'].map((bin) => [bin, `src/bin/${bin}.ts`]),
  ),
})
