/** Salt's `test` module: connectivity and plumbing checks. */
import { setTimeout as delay } from 'node:timers/promises'
import { cleanKwargs } from './args.js'
import { abortReason, InvocationError } from '../errors.js'
import type { JobContext, ModuleDefinition } from './types.js'
import { brineVersion } from './version.js'
import { msFromSeconds, secondsFromMs } from '@brine/config'

/** Python's int() of a CLI value: integers and integer strings only. */
export function toInt(value: unknown, name: string): number {
  const number = typeof value === 'string' && /^\s*[-+]?\d+\s*$/.test(value) ? Number(value) : value
  if (typeof number === 'number' && Number.isInteger(number)) return number
  if (typeof number === 'number' && Number.isFinite(number)) return Math.trunc(number)
  throw new InvocationError(`${name} must be an integer, got ${JSON.stringify(value)}`)
}

/** Waits `ms`, rejecting with the job's abort reason if it is killed first. */
export async function abortableDelay(ms: number, ctx: Pick<JobContext, 'signal' | 'jid'>): Promise<void> {
  try {
    await delay(ms, undefined, { signal: ctx.signal })
  } catch (error) {
    if (ctx.signal.aborted) throw abortReason(ctx.signal, ctx.jid)
    throw error
  }
}

export const testModule: ModuleDefinition = {
  ping: {
    doc: "Used to make sure the minion is up and responding. Not an ICMP ping.\n\nReturns ``True``.\n\nCLI Example:\n\n    brine '*' test.ping",
    run: async () => true,
  },
  echo: {
    doc: "Return a string - used for testing the connection\n\nCLI Example:\n\n    brine '*' test.echo 'foo bar baz quo qux'",
    args: ['text'],
    run: async ([text]) => text,
  },
  arg: {
    doc: 'Print out the data passed into the function ``*args`` and ``kwargs``, this is used to both test the publication data and cli argument passing, but also to display the information available within the publication data.\n\nReturns {"args": args, "kwargs": kwargs}.\n\nCLI Example:\n\n    brine \'*\' test.arg 1 "two" 3.1 txt="hello" wow=\'{a: 1, b: "hello"}\'',
    varargs: true,
    kwargs: true,
    run: async (args, kwargs) => ({ args, kwargs: cleanKwargs(kwargs) }),
  },
  kwarg: {
    doc: 'Print out the data passed into the function ``**kwargs``, including the publication data (``__pub_*``).\n\nCLI Example:\n\n    brine \'*\' test.kwarg num=1 txt="two" env=\'{a: 1, b: "hello"}\'',
    kwargs: true,
    run: async (_args, kwargs) => kwargs,
  },
  sleep: {
    doc: "Instruct the minion to initiate a process that will sleep for a given period of time.\n\nCLI Example:\n\n    brine '*' test.sleep 20",
    args: ['length'],
    run: async ([length], _kwargs, ctx) => {
      const seconds = toInt(length, 'length')
      if (seconds > 0) await abortableDelay(msFromSeconds(seconds), ctx)
      return true
    },
  },
  version: {
    doc: "Return the version of Brine on the minion\n\nCLI Example:\n\n    brine '*' test.version",
    run: async () => brineVersion(),
  },
  fib: {
    doc: "Return the num-th Fibonacci number, and the time it took to compute in seconds. Used for performance tests.\n\nCLI Example:\n\n    brine '*' test.fib 3",
    args: ['num'],
    run: async ([num]) => {
      const n = toInt(num, 'num')
      if (n < 0) throw new InvocationError('Negative number is not allowed!')
      const start = performance.now()
      let [a, b] = [0, 1]
      for (let index = 0; index < n; index++) [a, b] = [b, a + b]
      return [a, secondsFromMs(performance.now() - start)]
    },
  },
  collatz: {
    doc: "Execute the collatz conjecture from the passed starting number, returns the sequence and the time it took to compute. Used for performance tests.\n\nCLI Example:\n\n    brine '*' test.collatz 3",
    args: ['start'],
    run: async ([start]) => {
      let n = toInt(start, 'start')
      if (n < 1) throw new InvocationError('start must be a positive integer')
      const began = performance.now()
      const steps: number[] = []
      while (n !== 1) {
        steps.push(n)
        n = n % 2 === 0 ? n / 2 : n * 3 + 1
      }
      return [steps, secondsFromMs(performance.now() - began)]
    },
  },
  exception: {
    doc: "Raise an exception\n\nOptionally provide an error message or output the full stack.\n\nCLI Example:\n\n    brine '*' test.exception 'Oh noes!'",
    args: ['message'],
    defaults: { message: 'Test Exception' },
    run: async ([message]) => {
      throw new Error(String(message))
    },
  },
  retcode: {
    doc: "Test that the returncode system is functioning correctly\n\nCLI Example:\n\n    brine '*' test.retcode 42",
    args: ['code'],
    defaults: { code: 42 },
    run: async ([code], _kwargs, ctx) => {
      ctx.retcode = toInt(code, 'code')
      return true
    },
  },
  outputter: {
    doc: "Test the outputter, pass in data to return\n\nCLI Example:\n\n    brine '*' test.outputter foobar",
    args: ['data'],
    run: async ([data]) => data,
  },
  true: {
    doc: "Always return True\n\nCLI Example:\n\n    brine '*' test.true",
    run: async () => true,
  },
  false: {
    doc: "Always return False\n\nCLI Example:\n\n    brine '*' test.false",
    run: async () => false,
  },
  get_opts: {
    doc: "Return the configuration options passed to this minion\n\nCLI Example:\n\n    brine '*' test.get_opts",
    run: async (_args, _kwargs, ctx) => ctx.opts,
  },
}
