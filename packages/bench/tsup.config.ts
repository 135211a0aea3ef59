import { packageConfig } from '../../tsup.base.js'

// The bench and the swarm run as `node dist/bin/<name>.js` (the fleet spawns brine-swarm by path).
export default packageConfig({ bins: { 'brine-bench': 'src/bin/brine-bench.ts', 'brine-swarm': 'src/bin/brine-swarm.ts' } })
