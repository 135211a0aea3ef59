import { useState } from 'preact/hooks'
import type { ComponentChildren } from 'preact'
import { ApiFailure, type Session } from './api.js'

/** What a page knows of the signed-in user and the shared event stream. */
export interface PageProps {
  session: Session
}

/**
 * A failure as the operator should read it: a refusal says it was the ACL, quotes the master's reason
 * (who may not run what, where) and lists the user's own external_auth entries, the rules that applied.
 */
export function Problem({ error, session }: { error: unknown; session?: Session }) {
  if (error === undefined || error === null) return null
  const failure = error instanceof ApiFailure ? error : new ApiFailure(0, String((error as Error)?.message ?? error))
  if (failure.refused) {
    return (
      <div class="problem refused" role="alert">
        <strong>Refused by the master's ACL (external_auth, 401)</strong>
        <p class="reason">{failure.message}</p>
        {session !== undefined && (
          <p class="rules">
            Rules of {session.user} ({session.eauth}): <code>{JSON.stringify(session.perms)}</code>
          </p>
        )}
      </div>
    )
  }
  return (
    <div class="problem" role="alert">
      <strong>{failure.status === 0 ? 'Error' : `Error ${failure.status}`}</strong>
      <p class="reason">{failure.message}</p>
    </div>
  )
}

/** Pages of a long list: only `size` rows are ever in the DOM, so 1,000 minions stay responsive. */
export function usePager(total: number, size: number): { offset: number; size: number; pager: ComponentChildren } {
  const [page, setPage] = useState(0)
  const pages = Math.max(1, Math.ceil(total / size))
  const current = Math.min(page, pages - 1)
  const pager =
    pages <= 1 ? null : (
      <nav class="pager">
        <button type="button" disabled={current === 0} onClick={() => setPage(current - 1)}>
          ‹ Prev
        </button>
        <span>
          page {current + 1} of {pages} ({total})
        </span>
        <button type="button" disabled={current >= pages - 1} onClick={() => setPage(current + 1)}>
          Next ›
        </button>
      </nav>
    )
  return { offset: current * size, size, pager }
}

/** A value as Salt's nested outputter prints it, or as JSON. */
export function Output({ text, json, raw }: { text: string; json: unknown; raw: boolean }) {
  return <pre class="output">{raw ? JSON.stringify(json, null, 2) : text}</pre>
}

export const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)
