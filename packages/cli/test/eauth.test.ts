import { mkdir, readFile, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
// Tests only: a real master in-process.
import { Master } from '../../master/src/index.js'
import { cleanups, masterConfig, runCleanups, tempDir } from '../../master/test/helpers.js'
import { loadConfig } from '@brine/config'
import { readRootKey, rootKeyPath } from '@brine/crypt'
import { parseBrineArgs } from '../src/commands/brine.js'
import { resolveCredentials } from '../src/commands/eauth.js'
import { cliLogger } from '../src/io.js'
import { memoryIO } from './helpers.js'

afterEach(runCleanups)

describe("brine's eauth flags", () => {
  it('parses -a/--auth/--eauth, -T, --username and --password; -T alone is a usage error', () => {
    const io = memoryIO()
    expect(parseBrineArgs(['-a', 'file', '-T', '--username', 'alice', '--password', 'pw', '*', 'test.ping'], io)).toMatchObject({
      auth: { eauth: 'file', makeToken: true, username: 'alice', password: 'pw' },
    })
    expect(parseBrineArgs(['--eauth', 'file', '*', 'test.ping'], io)).toMatchObject({ auth: { eauth: 'file', makeToken: false } })
    expect(parseBrineArgs(['*', 'test.ping'], io)).toMatchObject({ auth: { makeToken: false } })
    const bad = memoryIO()
    // A usage error: exit 64 (EX_USAGE) in Salt's layout, as every CLI's.
    expect(parseBrineArgs(['-T', '*', 'test.ping'], bad)).toBe(64)
    expect(bad.err()).toMatch(/^Usage: brine .*\n\nbrine: error: -T\/--make-token needs -a\/--auth <backend>\n$/s)
  })

  it('-a with a prompt-less stdin needs --username and --password; -T saves a 0600 token that later runs use when the root key cannot be read', async () => {
    const dir = await tempDir()
    await writeFile(join(dir, 'users'), 'alice:wonder\n')
    const tokenFile = join(dir, 'token')
    const opts = await masterConfig(dir, {
      token_dir: join(dir, 'tokens'),
      token_file: tokenFile,
      external_auth: { file: { '^filename': join(dir, 'users'), alice: ['test.*'] } },
    })
    const master = new Master(opts)
    cleanups.push(() => master.stop())
    await master.start()
    const configDir = join(dir, 'etc')
    await mkdir(configDir)
    await writeFile(join(configDir, 'master'), stringify({ ...opts, root_dir: '/' }))
    const io = memoryIO()
    const logger = cliLogger('quiet', io, 'brine')
    // The config as brine reads it, once, and hands to resolveCredentials.
    const loaded = async (): Promise<Parameters<typeof resolveCredentials>[1]> => (await loadConfig('master', { configDir, logger })).opts
    const config = await loaded()
    await expect(resolveCredentials({ eauth: 'file', makeToken: false }, config, io, logger)).rejects.toThrow(
      '-a file needs --username and --password when stdin is not a terminal',
    )
    expect(await resolveCredentials({ eauth: 'file', makeToken: false, username: 'alice', password: 'wonder' }, config, io, logger)).toEqual({
      credentials: { eauth: 'file', username: 'alice', password: 'wonder' },
    })
    // No -a: the root key is readable, so it is used, as read here (the client does not read it again).
    expect(await resolveCredentials({ makeToken: false }, config, io, logger)).toEqual({ rootKey: await readRootKey(rootKeyPath(config.cachedir)) })
    const made = await resolveCredentials({ eauth: 'file', makeToken: true, username: 'alice', password: 'wonder' }, config, io, logger)
    expect(made).toEqual({ credentials: { token: (await readFile(tokenFile, 'utf8')).trim() } })
    expect((await stat(tokenFile)).mode & 0o777).toBe(0o600)
    // A root key this user cannot use (here: another cachedir without one) falls back to the saved token.
    await writeFile(join(configDir, 'master'), stringify({ ...opts, root_dir: '/', cachedir: join(dir, 'elsewhere') }))
    expect(await resolveCredentials({ makeToken: false }, await loaded(), io, logger)).toEqual(made)
  })
})
