import { setTimeout as sleep } from 'node:timers/promises'
import { MalformedRequestError } from '@brine/protocol'
import { param, type RunnerFunction } from './context.js'
import { msFromSeconds } from '@brine/config'

/** The longest test.sleep Node's timers can wait (2^31 - 1 ms), in seconds. */
const MAX_SLEEP_SECONDS = 2_147_483

/** Salt's metasyntactic variables per locality; another locality answers null, as Salt's dict.get does. */
const METASYNTACTIC: Record<string, string[]> = {
  us: ['foo', 'bar', 'baz', 'qux', 'quux', 'quuz', 'corge', 'grault', 'garply', 'waldo', 'fred', 'plugh', 'xyzzy', 'thud'],
  uk: ['wibble', 'wobble', 'wubble', 'flob'],
}

/** test.sleep's `s_time` (Salt's seconds, default 10). */
function seconds(value: unknown): number {
  const number = typeof value === 'string' && value.trim() !== '' ? Number(value) : value
  if (typeof number !== 'number' || !Number.isFinite(number) || number < 0 || number > MAX_SLEEP_SECONDS) {
    throw new MalformedRequestError(
      'runner test.sleep arguments',
      `'s_time' must be a number of seconds from 0 to ${MAX_SLEEP_SECONDS}, got ${JSON.stringify(value)}`,
    )
  }
  return number
}

/** Salt's runner test module: argument echoes and timing helpers for trying the runner path out. */
export const TEST_RUNNERS: Record<string, RunnerFunction> = {
  // Keyword names starting with __ are Salt's private ones: test.arg leaves them out, test.raw_arg keeps them.
  'test.arg': async ({ arg, kwarg }) => ({ args: arg, kwargs: Object.fromEntries(Object.entries(kwarg).filter(([key]) => !key.startsWith('__'))) }),
  'test.raw_arg': async ({ arg, kwarg }) => ({ args: arg, kwargs: kwarg }),
  'test.metasyntactic': async (args) => METASYNTACTIC[String(param(args, 0, 'locality') ?? 'us')] ?? null,
  'test.sleep': async (args) => {
    await sleep(msFromSeconds(seconds(param(args, 0, 's_time') ?? 10)))
    return true
  },
  // Salt prints 'foo' on salt-run's stdout; Brine's runners run inside the master, so only the return shows.
  'test.stdout_print': async () => 'bar',
  'test.get_opts': async (_args, context) => context.configValues,
  // Salt's stream fires 99 progress events, 0.1 s apart; Brine fires them as fast as the bus takes them.
  'test.stream': async (_args, context) => {
    for (let percent = 1; percent < 100; percent++) context.progress({ message: `Runner is ${percent}% done` })
    return true
  },
}
