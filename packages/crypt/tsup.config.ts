import { packageConfig } from '../../tsup.base.js'

// root-key-file: the `@brine/crypt/root-key` entry, the root key's path and reader without the package's cryptography.
export default packageConfig({ extraEntries: ['src/root-key-file.ts'] })
