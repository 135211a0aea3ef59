import { describe, expect, it } from 'vitest'
import { ConfigError, defaultsFor, type MasterConfig } from '@brine/config'
import { apiSettings } from '../src/config.js'

const master = (extra: Record<string, unknown>): MasterConfig => ({ ...defaultsFor('master'), ...extra }) as unknown as MasterConfig

describe('rest_cherrypy settings', () => {
  it("take Salt's defaults: host 0.0.0.0, /hook, 1 MiB bodies, sessions on, no client enabled", () => {
    const { settings, warnings } = apiSettings(master({ rest_cherrypy: { port: 8000, disable_ssl: true } }))
    expect(settings).toMatchObject({
      port: 8000,
      host: '0.0.0.0',
      webhookUrl: '/hook',
      maxRequestBodySize: 1_048_576,
      enableSessions: true,
      enabledClients: [],
      authorizedIps: [],
    })
    expect(warnings).toEqual([])
  })

  it('require port, and ssl_crt/ssl_key unless disable_ssl, naming the key', () => {
    const error = (() => {
      try {
        apiSettings(master({ rest_cherrypy: { host: '127.0.0.1' } }))
        return undefined
      } catch (caught) {
        return caught as ConfigError
      }
    })()
    expect(error).toBeInstanceOf(ConfigError)
    expect(error?.message).toBe('rest_cherrypy.port is required (an integer from 0 to 65535)')
    expect(() => apiSettings(master({ rest_cherrypy: { port: 8000 } }))).toThrow('rest_cherrypy.ssl_crt is required unless disable_ssl is true')
    expect(() => apiSettings(master({ rest_cherrypy: { port: 8000, ssl_crt: '/c' } }))).toThrow('rest_cherrypy.ssl_key is required unless disable_ssl is true')
    expect(() => apiSettings(master({ rest_cherrypy: { port: 'eighty', disable_ssl: true } }))).toThrow(
      'rest_cherrypy.port must be an integer from 0 to 65535, got "eighty"',
    )
  })

  it('keep the enabled clients Brine has and warn about the others and about unknown keys', () => {
    const { settings, warnings } = apiSettings(
      master({ rest_cherrypy: { port: 1, disable_ssl: true, expire_responses: false }, netapi_enable_clients: ['local', 'ssh', 'wheel_async'] }),
    )
    expect(settings.enabledClients).toEqual(['local', 'wheel_async'])
    expect(warnings).toEqual([
      'rest_cherrypy.expire_responses: unknown setting; ignored',
      "netapi_enable_clients: 'ssh' is not a client Brine's API has (local, local_async, local_batch, local_subset, runner, runner_async, wheel, wheel_async); ignored",
    ])
  })
})
