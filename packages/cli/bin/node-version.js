// Plain JavaScript that any Node can parse, so an unsupported Node gets this sentence instead of a stack from
// whatever newer API the commands use first.

/** The Node versions Brine runs on, as package.json's `engines` says (`^22.12.0 || >=24.0.0`). */
export const SUPPORTED_NODE = 'Node 24 LTS (Brine is built and shipped on it) or Node 22.12 and later 22.x'

/** Whether `version` (`24.21.0`, as in `process.versions.node`) is one Brine runs on. */
export function isSupportedNode(version) {
  const [major = 0, minor = 0] = String(version).split('.').map(Number)
  return major >= 24 || (major === 22 && minor >= 12)
}

/** Exits with a message naming `name` and the supported versions when this Node is not one of them. */
export function refuseUnsupportedNode(name, version = process.versions.node) {
  if (isSupportedNode(version)) return
  process.stderr.write(`${name}: Node ${version} is not supported; Brine needs ${SUPPORTED_NODE}\n`)
  process.exit(1)
}
