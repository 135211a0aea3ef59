import { BrineError } from '@brine/transport'

/** A daemon package that does not export the class the bin runs (a broken or mismatched install). */
export class DaemonLoadError extends BrineError {
  override name = 'DaemonLoadError'
  readonly role: string
  constructor(role: string, exportName: string) {
    super(`@brine/${role} does not export ${exportName}; reinstall Brine (npm ci) so its packages match`, { role, exportName })
    this.role = role
  }
}
