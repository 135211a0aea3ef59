/** The id a minion authenticates with, and the start events a minion (or a syndic's link) sends once accepted. */
import { ConfigError } from '@brine/config'
import { tags } from '@brine/protocol'
import { normalizeMinionId, validateMinionId } from '@brine/crypt'

/**
 * The id a minion (or a syndic) authenticates as: its config's `id`, checked by the master's rule here so
 * a bad id stops the start instead of retrying `_auth` forever — NFC (a decomposed `é` names the same key
 * as a composed one), no separators, nothing invisible, at most 237 bytes. ConfigError for an id that is
 * not a non-empty string, InvalidMinionIdError for one the master would refuse.
 */
export function authIdOf(opts: { id?: unknown }): string {
  if (typeof opts.id !== 'string' || opts.id === '') throw new ConfigError('id must be a non-empty string', { key: 'id' })
  const id = normalizeMinionId(opts.id)
  validateMinionId(id)
  return id
}

function asctime(date: Date): string {
  const days = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat']
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
  const two = (n: number): string => String(n).padStart(2, '0')
  return `${days[date.getDay()]} ${months[date.getMonth()]} ${String(date.getDate()).padStart(2, ' ')} ${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())} ${date.getFullYear()}`
}

/** Salt's `minion_start` / `salt/minion/<id>/start` events, as `_minion_event` carries them. */
export function minionStartEvents(id: string, now: Date = new Date()): { tag: string; data: Record<string, unknown> }[] {
  const data = `Minion ${id} started at ${asctime(now)}`
  return [tags.minionStart(id), tags.minionStartLegacy].map((tag) => ({ tag, data: { data, cmd: '_minion_event', id, pretag: null, tag } }))
}
