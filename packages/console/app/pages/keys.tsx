import { useEffect, useState } from 'preact/hooks'
import { wheel, type Session } from '../api.js'
import { isMap, Problem } from '../ui.js'

const GROUPS = [
  ['minions_pre', 'Pending', ['accept', 'reject', 'delete']],
  ['minions', 'Accepted', ['reject', 'delete']],
  ['minions_rejected', 'Rejected', ['accept', 'delete']],
  ['minions_denied', 'Denied', ['delete']],
] as const

type Action = 'accept' | 'reject' | 'delete'

interface Keys {
  lists: Record<string, string[]>
  fingers: Record<string, Record<string, string>>
}

async function loadKeys(session: Session): Promise<Keys> {
  const [lists, fingers] = await Promise.all([wheel(session, 'key.list_all'), wheel(session, 'key.finger', { match: '*' }).catch(() => ({}))])
  return { lists: isMap(lists) ? (lists as Record<string, string[]>) : {}, fingers: isMap(fingers) ? (fingers as Record<string, Record<string, string>>) : {} }
}

/** One key state's table: id, fingerprint, and the actions that state allows. */
function KeyGroup({
  keys,
  group,
  label,
  actions,
  ask,
}: {
  keys: Keys
  group: string
  label: string
  actions: readonly Action[]
  ask: (action: Action, id: string) => void
}) {
  const ids = keys.lists[group] ?? []
  return (
    <div class="key-group" data-group={group}>
      <h2>
        {label} ({ids.length})
      </h2>
      <table class="keys">
        <tbody>
          {ids.map((id) => (
            <tr key={id} data-key={id}>
              <td class="id">{id}</td>
              <td class="finger">
                <code>{keys.fingers[group]?.[id] ?? ''}</code>
              </td>
              <td>
                {actions.map((action) => (
                  <button type="button" data-action={action} onClick={() => ask(action, id)}>
                    {action}
                  </button>
                ))}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

/** salt-key in a page: every state with fingerprints; accept, reject and delete after a confirmation. */
export function KeysPage({ session }: { session: Session }) {
  const [keys, setKeys] = useState<Keys | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [asking, setAsking] = useState<{ action: Action; id: string } | undefined>(undefined)
  const [done, setDone] = useState<string | undefined>(undefined)
  const refresh = (): void => {
    loadKeys(session).then(setKeys, setError)
  }
  useEffect(refresh, [session])
  const confirm = async (): Promise<void> => {
    if (asking === undefined) return
    const { action, id } = asking
    setAsking(undefined)
    setError(undefined)
    try {
      // The wheel's key.accept and key.reject take the key from any state, as salt-key -a / -r with include_* do.
      const extra = action === 'delete' ? {} : { include_rejected: true, include_denied: true, ...(action === 'reject' ? { include_accepted: true } : {}) }
      await wheel(session, `key.${action}`, { match: id, ...extra })
      setDone(`${action}: ${id}`)
      refresh()
    } catch (failure) {
      setError(failure)
    }
  }
  return (
    <section>
      <h1>Keys</h1>
      <Problem error={error} session={session} />
      {done !== undefined && (
        <p class="notice" role="status">
          Done — {done}
        </p>
      )}
      {asking !== undefined && (
        <div class="confirm" role="dialog" aria-label="confirm">
          <p>
            {asking.action} the key of <strong>{asking.id}</strong>?
          </p>
          <button type="button" class="danger" onClick={() => void confirm()}>
            Yes, {asking.action}
          </button>
          <button type="button" onClick={() => setAsking(undefined)}>
            Cancel
          </button>
        </div>
      )}
      {keys === undefined && error === undefined && <p>loading…</p>}
      {keys !== undefined &&
        GROUPS.map(([group, label, actions]) => (
          <KeyGroup keys={keys} group={group} label={label} actions={actions} ask={(action, id) => setAsking({ action, id })} />
        ))}
    </section>
  )
}
