import { chmod, readFile, writeFile } from 'node:fs/promises'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { Option, type Command } from 'commander'
import { EauthClient, type ClientCredentials } from '@brine/client'
import { msFromSeconds, type MasterConfig } from '@brine/config'
import { readRootKey, rootKeyPath } from '@brine/crypt/root-key'
import type { Logger } from '@brine/core'
import { UsageError } from '../errors.js'
import type { CommandIO } from '../io.js'

/** What `-a/--auth/--eauth`, `-T/--make-token`, `--username` and `--password` asked for. */
export interface EauthArgs {
  /** The eauth backend (`file`), when `-a` was given. */
  eauth?: string
  makeToken: boolean
  username?: string
  password?: string
}

/** Salt's eauth flags on a command (`salt -a pam -T`, `--username`, `--password`). */
export function addEauthOptions(program: Command): Command {
  return program
    .option('-a, --auth <backend>', "authenticate with an external auth backend (e.g. file) instead of the master's root key (also --eauth)")
    .addOption(new Option('--eauth <backend>', 'the same as -a/--auth').hideHelp())
    .option('-T, --make-token', 'with -a: save a token (token_file, default ~/.brine_token) for later runs without a password')
    .option('--username <name>', 'with -a: the user name (asked for on a terminal otherwise)')
    .option('--password <password>', 'with -a: the password (asked for on a terminal otherwise)')
}

/** The eauth flags from parsed options. */
export function eauthArgs(options: Record<string, unknown>): EauthArgs {
  const out: EauthArgs = { makeToken: options.makeToken === true }
  const backend = options.auth ?? options.eauth
  if (typeof backend === 'string') out.eauth = backend
  if (typeof options.username === 'string') out.username = options.username
  if (typeof options.password === 'string') out.password = options.password
  if (out.makeToken && out.eauth === undefined) throw new UsageError('-T/--make-token needs -a/--auth <backend>')
  return out
}

/** `~/x` → the home directory's x. */
const expandHome = (path: string): string => (path === '~' ? homedir() : path.startsWith('~/') ? join(homedir(), path.slice(2)) : path)

/** What a command authenticates with: eauth credentials, or the root key (read once, here, and handed to the client). */
export type ResolvedCredentials = { credentials: ClientCredentials } | { rootKey: string }

/**
 * The credentials a command sends, as Salt's CLI picks them: with `-a`, the backend, user and password
 * (asked for on a terminal when not given), or with `-T` a token made from them and saved to
 * `token_file` (mode 0600); without `-a`, the root key when it can be read, else the token in
 * `token_file` when there is one (Salt's client_config reads it). `opts` is the master config the
 * command already loaded.
 */
export async function resolveCredentials(args: EauthArgs, opts: MasterConfig, io: CommandIO, logger: Logger): Promise<ResolvedCredentials> {
  const tokenFile = expandHome(String(opts.token_file ?? '~/.brine_token'))
  if (args.eauth === undefined) {
    try {
      return { rootKey: await readRootKey(rootKeyPath(opts.cachedir)) }
    } catch (error) {
      const token = await readFile(tokenFile, 'utf8').then(
        (text) => text.trim(),
        () => '',
      )
      if (token === '') throw error
      logger.debug(`the root key cannot be read (${(error as Error).message}); using the token in ${tokenFile}`)
      return { credentials: { token } }
    }
  }
  const username = args.username ?? (io.prompt === undefined ? undefined : await io.prompt('username: '))
  const password = args.password ?? (io.promptSecret === undefined ? undefined : await io.promptSecret('password: '))
  if (username === undefined || password === undefined) throw new UsageError(`-a ${args.eauth} needs --username and --password when stdin is not a terminal`)
  const login = { eauth: args.eauth, username, password }
  if (!args.makeToken) return { credentials: login }
  const eauth = new EauthClient({ opts, logger, credentials: login })
  try {
    const made = await eauth.mkToken(login)
    await writeFile(tokenFile, `${made.token}\n`, { mode: 0o600 })
    await chmod(tokenFile, 0o600)
    logger.info(`token for ${made.name} saved to ${tokenFile} (valid until ${new Date(msFromSeconds(made.expire)).toISOString()})`)
    return { credentials: { token: made.token } }
  } finally {
    await eauth.close()
  }
}
