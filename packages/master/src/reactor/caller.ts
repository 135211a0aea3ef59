import type { Logger } from '@brine/core'
import type { AclEntry } from '../acl.js'
import type { Caller } from '../authorize.js'
import type { ExternalAuth } from '../eauth/external-auth.js'

/**
 * Who reactions run as: `reactor_user` with exactly the ACL `external_auth` gives that user (summed over the
 * backends that name it), never more. `root`, the default, is the master itself, as Salt's reactor runs with
 * the master's rights. A user no backend names may do nothing, and the start says so.
 */
export function reactorCaller(user: string, externalAuth: ExternalAuth | undefined, backends: readonly string[], logger: Logger): Caller {
  if (user === 'root') return { user, auth: 'reactor', permissions: 'all' }
  const permissions: AclEntry[] = []
  for (const backend of backends) if (externalAuth !== undefined) permissions.push(...externalAuth.authList(backend, user, []))
  if (permissions.length === 0) logger.warning(`reactor_user ${JSON.stringify(user)} has no entry in external_auth: every reaction's call will be refused`)
  return { user, auth: 'reactor', permissions }
}
