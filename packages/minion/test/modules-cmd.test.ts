import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { createLogger } from '@brine/core'
import { executeJob } from '../src/executor.js'
import { createCmdModule, shlexSplit } from '../src/modules/cmd.js'
import { createModuleRegistry } from '../src/modules/registry.js'
import { RunningJobs } from '../src/modules/running-jobs.js'
import type { JobContext } from '../src/modules/types.js'
import { deadline, makeFixture, nextJid, processExists } from './modules-fixture.js'

const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'brine-cmd-')))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe('cmd module', () => {
  const { run } = makeFixture()

  it('run returns stdout with stderr folded in and trailing whitespace stripped', async () => {
    expect(await run('cmd.run', ['echo out; echo err 1>&2; printf "x  \\n\\n"'])).toEqual({ return: 'out\nerr\nx', retcode: 0, success: true })
  })

  it("run's job retcode follows the command's exit status", async () => {
    expect(await run('cmd.run', ['echo nope; exit 3'])).toEqual({ return: 'nope', retcode: 3, success: false })
    expect(await run('cmd.run', ['exit 3', 'ignore_retcode=True'])).toMatchObject({ retcode: 0, success: true })
  })

  it('run_all keeps the streams apart and reports pid and retcode', async () => {
    const result = await run('cmd.run_all', ['echo out; echo err >&2; exit 2'])
    expect(result.retcode).toBe(2)
    expect(result.return).toEqual({ pid: expect.any(Number), retcode: 2, stdout: 'out', stderr: 'err' })
    expect(((await run('cmd.run_all', ['echo a; echo b >&2', 'redirect_stderr=True'])).return as { stdout: string }).stdout).toBe('a\nb')
  })

  it('retcode returns the exit code; stdout/stderr variants pick a stream', async () => {
    expect((await run('cmd.retcode', ['exit 5'])).return).toBe(5)
    expect((await run('cmd.run_stdout', ['echo o; echo e >&2'])).return).toBe('o')
    expect((await run('cmd.run_stderr', ['echo o; echo e >&2'])).return).toBe('e')
    expect((await run('cmd.shell', ['echo $((2+3))'])).return).toBe('5')
  })

  it('honours cwd (positional, as in Salt) and env merged over the minion env', async () => {
    expect((await run('cmd.run', ['pwd', scratch])).return).toBe(scratch)
    const env = await run('cmd.run', ['echo "$BRINE_X:${PATH:+haspath}"', { __kwarg__: true, env: { BRINE_X: 'hello' } }])
    expect(env.return).toBe('hello:haspath')
    const clean = await run('cmd.run', ['echo "[$HOME]"', { __kwarg__: true, env: { A: '1' }, clean_env: true }])
    expect(clean.return).toBe('[]')
  })

  it('refuses a relative or missing cwd and a non-dict env', async () => {
    expect(await run('cmd.run', ['pwd', 'cwd=relative/dir'])).toEqual({
      return: "ERROR: Specified cwd 'relative/dir' either not absolute or does not exist",
      retcode: 1,
      success: false,
      out: 'nested',
    })
    expect((await run('cmd.run', ['true', 'env=notadict'])).return).toBe("ERROR executing 'cmd.run': Invalid input for 'env': must be a dict")
  })

  it("times out with Salt's message and kills the process group", async () => {
    const result = await run('cmd.run_all', [`sleep 5 & echo $! > ${scratch}/bg.pid; wait`, 'timeout=1'])
    expect(result.return).toEqual({
      pid: expect.any(Number),
      retcode: 1,
      stdout: `sleep 5 & echo $! > ${scratch}/bg.pid; wait : Timed out after 1 seconds`,
      stderr: '',
    })
    const sleeper = Number((await run('cmd.run', [`cat ${scratch}/bg.pid`])).return)
    expect(processExists(sleeper)).toBe(false)
    expect((await run('cmd.run', ['sleep 5', 'timeout=1'])).return).toBe('sleep 5 : Timed out after 1 seconds')
  })

  it('python_shell=False execs argv directly, quoting as shlex does', async () => {
    expect((await run('cmd.run', ['printf %s-%s "a b" \'c d\'', 'python_shell=False'])).return).toBe('a b-c d')
    expect((await run('cmd.run', ['echo $HOME', 'python_shell=False'])).return).toBe('$HOME')
    const missing = await run('cmd.run', ['/nonexistent/binary', 'python_shell=False'])
    expect(missing.return).toMatch(/^ERROR: Unable to run command '\/nonexistent\/binary', reason: .*ENOENT/)
    expect(shlexSplit(`a "b \\"c\\"" 'd e' f\\ g`)).toEqual(['a', 'b "c"', 'd e', 'f g'])
  })

  it("an unset python_shell is true for a job, false for another module's call (Salt's _python_shell_default)", async () => {
    const caller = {
      home: {
        doc: 'calls cmd.run as another module would',
        args: ['python_shell'],
        defaults: { python_shell: null },
        run: async ([pythonShell]: unknown[], _kwargs: Record<string, unknown>, ctx: JobContext) =>
          ctx.registry.get('cmd.run')!.run(['echo $HOME', null, null, null, null, null, pythonShell], {}, ctx),
      },
    }
    const { run: call } = makeFixture({}, { caller })
    expect((await call('caller.home')).return).toBe('$HOME')
    expect((await call('caller.home', [true])).return).not.toBe('$HOME')
    expect((await call('cmd.run', ['echo $((2+3))'])).return).toBe('5')
  })

  it('output_loglevel logs the command and its output at that level; quiet logs nothing', async () => {
    const lines: string[] = []
    const registry = createModuleRegistry({
      id: 'm1',
      grains: {},
      opts: {},
      logger: createLogger({ level: 'trace', write: (line) => lines.push(line) }),
      jobs: new RunningJobs(),
    })
    const call = (arg: unknown[]) => executeJob(registry, { jid: nextJid(), fun: 'cmd.run', arg })
    await call(['echo logged-output', 'output_loglevel=info'])
    expect(lines.some((line) => /\binfo\b/i.test(line) && line.includes("Executing command 'echo logged-output'"))).toBe(true)
    expect(lines.some((line) => line.includes('output: logged-output'))).toBe(true)
    lines.length = 0
    await call(['echo hidden', 'output_loglevel=quiet'])
    expect(lines.filter((line) => line.includes('hidden'))).toEqual([])
    expect((await call(['true', 'output_loglevel=loud'])).return).toMatch(/^ERROR executing 'cmd.run': output_loglevel must be a log level/)
  })

  it('feeds stdin, turning a literal \\n into a newline like Salt', async () => {
    expect((await run('cmd.run', ['cat', 'stdin=one\\ntwo'])).return).toBe('one\ntwo')
  })

  it('caps the output and marks the cut', async () => {
    const { run: capped } = makeFixture({}, { cmd: createCmdModule({ maxOutputBytes: 1000 }) })
    const result = (await capped('cmd.run', ['head -c 5000 /dev/zero | tr "\\0" a'])).return as string
    expect(result).toBe(`${'a'.repeat(1000)}\n[brine: output truncated at 1000 bytes]`)
  })

  it('refuses runas when the minion is not root', async () => {
    const { run: asUser } = makeFixture({}, { cmd: createCmdModule({ getuid: () => 1000 }) })
    expect(await asUser('cmd.run', ['id -un', 'runas=nobody'])).toEqual({
      return: 'ERROR: runas requires root (minion runs as uid 1000)',
      retcode: 1,
      success: false,
      out: 'nested',
    })
  })

  it.runIf(process.getuid?.() === 0)('runs as another user when root', async () => {
    expect(await run('cmd.run', ['id -un', 'runas=nobody'])).toEqual({ return: 'nobody', retcode: 0, success: true })
    // Privileges are dropped completely: no supplementary root group survives.
    expect((await run('cmd.run', ['id -G', 'runas=nobody'])).return).not.toMatch(/(^| )0( |$)/)
    expect((await run('cmd.run', ['true', 'runas=no-such-user-brine'])).return).toBe("ERROR: User 'no-such-user-brine' is not available")
  })

  it('saltutil.kill_job kills a running command and its process group', async () => {
    const { start, run: call } = makeFixture()
    const job = start('cmd.run', ['sleep 30'])
    const found = (await call('saltutil.find_job', [job.jid])).return as { child_pids?: number[] }
    const [child] = found.child_pids ?? []
    expect(child).toBeTypeOf('number')
    expect((await call('saltutil.kill_job', [job.jid])).return).toBe(`Signal 9 sent to job ${job.jid} at pid ${process.pid}`)
    const result = await deadline(job.result, 10_000, 'the killed cmd.run job to return')
    expect(result).toMatchObject({ retcode: 1, success: false, killed: true })
    expect(processExists(child as number)).toBe(false)
  })
})
