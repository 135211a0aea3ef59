import { isMainThread, parentPort, threadId, workerData, type MessagePort } from 'node:worker_threads'
import bcrypt from 'bcryptjs'
import {
  boxSharedKey,
  CryptCache,
  handleAuth,
  sealEncodedPublish,
  type AuthOutcome,
  type KeyPair,
  type PkiStore,
  type PublicKeys,
  type SessionKey,
  type SubmitOptions,
  type SubmitResult,
} from '@brine/crypt'
import { serializeError, type SerializedError, type WireValue } from '@brine/core'

/**
 * The costly half of request handling: signature checks at auth, X25519 shared keys, publish
 * sealing. The same {@link RequestCrypto} runs inline (worker_threads: 0) or inside each worker
 * thread; state (key store, jobs, events) stays on the main thread, which passes in what a task
 * needs (the minion's accepted box key, the current session key). Opening and sealing a minion's
 * box once its shared key is known costs less than a hop to a worker, so the main thread does it.
 */

export type WorkerTask =
  | { op: 'auth'; request: unknown; session: SessionKey; autoAccept: boolean; openMode: boolean; now: number; publishPort: number; sessionTtlMs: number }
  | { op: 'box-shared-key'; boxKey: Uint8Array }
  | { op: 'box-shared-keys'; boxKeys: Uint8Array[] }
  | { op: 'seal-publish'; encoded: Uint8Array; session: SessionKey }
  | { op: 'bcrypt-compare'; password: string; hash: string }

/** What a `bcrypt-compare` task answers: the verdict, and the thread that spent the CPU on it. */
export interface HashVerdict {
  match: boolean
  threadId: number
}

/** Records an auth attempt in the key store, which lives on the main thread. */
export type SubmitKey = (id: string, keys: PublicKeys, options: SubmitOptions) => Promise<SubmitResult>

export class RequestCrypto {
  readonly #keys: KeyPair
  /** The imported master key objects, agreed keys and the nonce pool, kept for this thread: importing a key again for every task would cost more than the task. */
  readonly #cache = new CryptCache()

  constructor(masterKeys: KeyPair) {
    this.#keys = masterKeys
  }

  async run(task: WorkerTask, submit: SubmitKey): Promise<WireValue> {
    switch (task.op) {
      case 'auth':
        return this.auth(task.request, task.session, { autoAccept: task.autoAccept, openMode: task.openMode }, submit, {
          now: task.now,
          publishPort: task.publishPort,
          sessionTtlMs: task.sessionTtlMs,
        })
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

  /** crypt's handleAuth, with the store reduced to the one call it makes (submit). */
  auth(
    request: unknown,
    session: SessionKey,
    options: SubmitOptions,
    submit: SubmitKey,
    reply: { now?: number; publishPort?: number; sessionTtlMs?: number } = {},
  ): Promise<AuthOutcome> {
    const store = { submit: (id: string, keys: PublicKeys, submitOptions: SubmitOptions) => submit(id, keys, submitOptions) }
    return handleAuth(request, store as unknown as PkiStore, session, this.#keys, { ...options, ...reply, cache: this.#cache })
  }
}

/** Main thread → worker. */
export type ToWorker =
  { type: 'task'; taskId: number; task: WorkerTask } | { type: 'submitted'; callId: number; result?: SubmitResult; error?: SerializedError }

/** Worker → main thread. */
export type FromWorker =
  | { type: 'done'; taskId: number; value?: WireValue; error?: SerializedError; threadId: number }
  | { type: 'submit'; callId: number; id: string; keys: PublicKeys; options: SubmitOptions }

export interface RequestWorkerData {
  brineRequestWorker: true
  masterKeys: KeyPair
}

/** The worker thread's loop: run each task, relay key store submissions to the main thread. */
export function runRequestWorker(port: MessagePort, data: RequestWorkerData): void {
  const crypto = new RequestCrypto(data.masterKeys)
  const calls = new Map<number, { resolve: (result: SubmitResult) => void; reject: (error: Error) => void }>()
  let nextCall = 0
  const submit: SubmitKey = (id, keys, options) =>
    new Promise((resolve, reject) => {
      const callId = nextCall++
      calls.set(callId, { resolve, reject })
      port.postMessage({ type: 'submit', callId, id, keys, options } satisfies FromWorker)
    })
  port.on('message', (message: ToWorker) => {
    if (message.type === 'submitted') {
      const call = calls.get(message.callId)
      calls.delete(message.callId)
      if (message.error !== undefined) call?.reject(Object.assign(new Error(message.error.message), { name: message.error.name }))
      else call?.resolve(message.result!)
      return
    }
    crypto.run(message.task, submit).then(
      (value) => port.postMessage({ type: 'done', taskId: message.taskId, value, threadId } satisfies FromWorker),
      (error: unknown) => port.postMessage({ type: 'done', taskId: message.taskId, error: serializeError(error), threadId } satisfies FromWorker),
    )
  })
}

if (!isMainThread && parentPort !== null && (workerData as Partial<RequestWorkerData> | null)?.brineRequestWorker === true) {
  runRequestWorker(parentPort, workerData as RequestWorkerData)
}
