import { packageConfig } from '../../tsup.base.js'

// It bundles yaml (CommonJS), which needs a real `require`.
export default packageConfig({ requireShim: true })
