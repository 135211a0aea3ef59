import { parseLogLevel } from '@brine/core'
import { loadConfig, parseOverride } from '@brine/config'
import type { ApiServer } from '@brine/api'
import { cliLogger, EXIT_GENERIC, EXIT_OK, type CommandIO } from '../io.js'
import { addCommonOptions, createProgram, parseArgv } from '../program.js'

/** Resolves when `signal` aborts (never without one). */
function aborted(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal === undefined) return
    if (signal.aborted) return resolve()
    signal.addEventListener('abort', () => resolve(), { once: true })
  })
}

/**
 * `brine-api` (Salt's `salt-api`): serves the REST API configured by the master config's
 * `rest_cherrypy` block, beside the running master, until SIGTERM/SIGINT. 0 after a clean stop, 1 when
 * the config or the start failed, 2 for a usage error.
 */
export async function runApi(argv: readonly string[], io: CommandIO): Promise<number> {
  const program = addCommonOptions(createProgram('brine-api', io))
    .description("Serve Brine's salt-api compatible REST API (Salt's `salt-api` with rest_cherrypy), configured in the master config.")
    .option(
      '--set <key=value>',
      'set any master config key (repeatable), e.g. --set rest_cherrypy={port: 8000, disable_ssl: true}',
      (value: string, previous: string[]) => [...previous, value],
      [] as string[],
    )
  const code = parseArgv(program, argv)
  if (code !== undefined) return code
  const o = program.opts<{ configDir: string; logLevel: string; set: string[] }>()
  const cliLevel = program.getOptionValueSource('logLevel') === 'cli' ? o.logLevel : undefined
  let server: ApiServer
  let logger = cliLogger(cliLevel ?? 'warning', io, 'brine-api')
  try {
    const overrides: Record<string, unknown> = {}
    for (const text of o.set) {
      const { key, value } = parseOverride(text)
      overrides[key] = value
    }
    const { opts } = await loadConfig('master', { configDir: o.configDir, overrides, logger })
    logger = cliLogger(cliLevel ?? parseLogLevel(String(opts.log_level ?? 'warning')), io, 'brine-api')
    // The server (fastify and its plugins, the console's files: hundreds of modules) loads only once there is one to
    // start, so --version, --help and a usage error do not pay for it.
    const { ApiServer, apiSettings } = await import('@brine/api')
    const { settings, warnings } = apiSettings(opts)
    for (const warning of warnings) logger.warning(warning)
    server = new ApiServer(opts, settings, { logger })
    await server.start()
  } catch (error) {
    io.stderr.write(`brine-api: cannot start: ${(error as Error).message}\n`)
    return EXIT_GENERIC
  }
  await aborted(io.signal)
  logger.info('brine-api stopping')
  try {
    await server.stop()
  } catch (error) {
    io.stderr.write(`brine-api: error while stopping: ${(error as Error).message}\n`)
    return EXIT_GENERIC
  }
  return EXIT_OK
}
