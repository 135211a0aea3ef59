import { pythonRepr } from './python.js'

/** Salt's `raw` outputter: the data as Python prints it (`{'web1': True}`). */
export function rawOutput(data: unknown): string {
  return typeof data === 'string' ? data : pythonRepr(data)
}
