import { isMainThread, parentPort, threadId, workerData, type MessagePort } from 'node:worker_threads'
import bcrypt from 'bcryptjs'
import {
  acceptAuth,
  boxSharedKey,
  checkAuthRequest,
  CryptCache,
  sealEncodedPublish,
  type AuthAcceptanceMade,
  type AuthOutcome,
  type AuthRequest,
  type CheckedAuth,
  type KeyPair,
  type SessionKey,
} from '@brine/crypt'
import { serializeError, type SerializedError, type WireValue } from '@brine/core'

/**
 * The costly half of request handling: signature checks at auth, X25519 shared keys, publish
 * sealing. The same {@link RequestCrypto} runs inline (worker_threads: 0) or inside each worker
 * thread; state (key store, jobs, events) stays on the main thread, which passes in what a task
 * needs (the minion's accepted box key, the current session key). Opening and sealing a minion's
 * box once its shared key is known costs less than a hop to a worker, so the main thread does it.
 *
 * An `_auth` is one task (two messages): the request's checks, and, when the main thread expects the key to be
 * accepted (`auto_accept`, `open_mode`, or the key accepted already), the acceptance made with them; the main thread
 * then asks its key store and answers. Only an acceptance it did not expect costs a second task (`auth-accept`).
 */

/** What an `auth` task is told to make an acceptance with: the reply's session key and fields. */
export interface AuthAcceptParams {
  session: SessionKey
  now: number
  publishPort: number
  sessionTtlMs: number
}

export type WorkerTask =
  | { op: 'auth'; request: unknown; now: number; accept?: AuthAcceptParams }
  | ({ op: 'auth-accept'; request: AuthRequest } & AuthAcceptParams)
  | { op: 'box-shared-key'; boxKey: Uint8Array }
  | { op: 'box-shared-keys'; boxKeys: Uint8Array[] }
  | { op: 'seal-publish'; encoded: Uint8Array; session: SessionKey }
  | { op: 'bcrypt-compare'; password: string; hash: string }

/** What an `auth` task answers: the refusal of a request that failed its checks, or the checked request (and the acceptance asked for). */
export type AuthTaskResult = { ok: false; outcome: AuthOutcome } | { ok: true; checked: CheckedAuth; acceptance?: AuthAcceptanceMade }

/** What a `bcrypt-compare` task answers: the verdict, and the thread that spent the CPU on it. */
export interface HashVerdict {
  match: boolean
  threadId: number
}

export class RequestCrypto {
  readonly #keys: KeyPair
  /** The imported master key objects, agreed keys and the nonce pool, kept for this thread: importing a key again for every task would cost more than the task. */
  readonly #cache = new CryptCache()

  constructor(masterKeys: KeyPair) {
    this.#keys = masterKeys
  }

  run(task: WorkerTask): WireValue {
    switch (task.op) {
      case 'auth':
        return this.#auth(task.request, task.now, task.accept) as unknown as WireValue
      case 'auth-accept':
        return acceptAuth(task.request, task.session, this.#keys, {
          now: task.now,
          publishPort: task.publishPort,
          sessionTtlMs: task.sessionTtlMs,
          cache: this.#cache,
        }) as unknown as WireValue
      case 'box-shared-key':
        return boxSharedKey(task.boxKey, this.#keys.box.secretKey, this.#cache)
      case 'box-shared-keys':
        // Many minions' at once (a restarted master's fleet): one hop for a batch. A key that cannot be agreed is null.
        return task.boxKeys.map((boxKey) => {
          try {
            return boxSharedKey(boxKey, this.#keys.box.secretKey, this.#cache)
          } catch {
            return null
          }
        })
      case 'seal-publish':
        return sealEncodedPublish(task.encoded, task.session, this.#keys.sign.secretKey, this.#cache)
      case 'bcrypt-compare':
        // Synchronous: the thread is the unit of concurrency (PasswordHashPool bounds it), and bcryptjs's async
        // compare would only interleave hashes on one thread.
        return { match: bcrypt.compareSync(task.password, task.hash), threadId } satisfies HashVerdict as unknown as WireValue
    }
  }

  /** An `_auth` request's checks, and the acceptance made at once when `accept` says how. */
  #auth(request: unknown, now: number, accept: AuthAcceptParams | undefined): AuthTaskResult {
    const check = checkAuthRequest(request, { now, cache: this.#cache })
    if (!check.ok || accept === undefined) return check
    return {
      ...check,
      acceptance: acceptAuth(check.checked.request, accept.session, this.#keys, {
        now: accept.now,
        publishPort: accept.publishPort,
        sessionTtlMs: accept.sessionTtlMs,
        cache: this.#cache,
      }),
    }
  }
}

/** Main thread → worker. */
export interface ToWorker {
  type: 'task'
  taskId: number
  task: WorkerTask
}

/** Worker → main thread. */
export interface FromWorker {
  type: 'done'
  taskId: number
  value?: WireValue
  error?: SerializedError
  threadId: number
}

export interface RequestWorkerData {
  brineRequestWorker: true
  masterKeys: KeyPair
}

/** The worker thread's loop: run each task, answer with its value or its error. */
export function runRequestWorker(port: MessagePort, data: RequestWorkerData): void {
  const crypto = new RequestCrypto(data.masterKeys)
  port.on('message', (message: ToWorker) => {
    let done: FromWorker
    try {
      done = { type: 'done', taskId: message.taskId, value: crypto.run(message.task), threadId }
    } catch (error) {
      done = { type: 'done', taskId: message.taskId, error: serializeError(error), threadId }
    }
    port.postMessage(done)
  })
}

if (!isMainThread && parentPort !== null && (workerData as Partial<RequestWorkerData> | null)?.brineRequestWorker === true) {
  runRequestWorker(parentPort, workerData as RequestWorkerData)
}
