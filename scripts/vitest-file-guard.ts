// vitest setupFiles: runs before every test file. The files share their workers (`isolate: false` in vitest.config.ts),
// so what a file leaves in the process reaches the next file in that worker. After the file's own hooks (vitest runs
// afterAll hooks last-registered first, and this one is registered before the file's), it kills what the test kit
// started and the file left running, gives back the file's ports, puts back the environment as the file found it, and
// fails the file that left a process listener behind (a signal handler added per file would stack up).
import { afterAll } from 'vitest'
import { BrineError } from '@brine/core'
import { killAllProcesses, releasePortClaims } from '@brine/testkit'

/** A test file left a listener on `process` that it added: it would stay for every later file in its worker. */
export class LeftListenerError extends BrineError {
  override name = 'LeftListenerError'
}

const WATCHED = ['SIGINT', 'SIGTERM', 'SIGHUP', 'exit', 'beforeExit', 'uncaughtException', 'unhandledRejection', 'warning'] as const

/** `process` as a plain emitter: its typed overloads take one kind of event each. */
const emitter: NodeJS.EventEmitter = process
const environment = { ...process.env }
const listeners = new Map(WATCHED.map((event) => [event, new Set(emitter.listeners(event))]))

function restoreEnvironment(): void {
  for (const name of Object.keys(process.env)) if (!(name in environment)) delete process.env[name]
  Object.assign(process.env, environment)
}

/** The listeners added to `process` since the file started, which are removed and named. */
function takeAddedListeners(): string[] {
  const added: string[] = []
  for (const event of WATCHED) {
    const before = listeners.get(event)!
    for (const listener of emitter.listeners(event)) {
      if (before.has(listener)) continue
      emitter.removeListener(event, listener as (...args: unknown[]) => void)
      added.push(`${event}: ${listener.name || 'an anonymous function'}`)
    }
  }
  return added
}

afterAll(() => {
  killAllProcesses()
  releasePortClaims()
  restoreEnvironment()
  const added = takeAddedListeners()
  if (added.length > 0) {
    throw new LeftListenerError(`the file left ${added.length} listener(s) on process (removed now): ${added.join('; ')}`, { added })
  }
})
