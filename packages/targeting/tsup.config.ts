import { packageConfig } from '../../tsup.base.js'

export default packageConfig()
