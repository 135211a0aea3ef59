import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createLogger } from '@brine/core'
import { ConfigError } from '../src/errors.js'
import { checkConfig, loadConfig, parseOverride, parseOverrides } from '../src/config.js'
import { brokerFromConfig, endpointLimitsFromConfig } from '../src/units.js'

let dir: string

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'brine-config-'))
})
afterEach(async () => {
  await rm(dir, { recursive: true, force: true })
})

async function write(name: string, text: string): Promise<string> {
  const file = join(dir, name)
  await mkdir(join(file, '..'), { recursive: true })
  await writeFile(file, text)
  return file
}

async function loadError(role: 'master' | 'minion' | 'syndic', overrides?: Record<string, unknown>): Promise<ConfigError> {
  const error = await loadConfig(role, { configDir: dir, overrides }).then(
    () => undefined,
    (caught: unknown) => caught,
  )
  expect(error).toBeInstanceOf(ConfigError)
  return error as ConfigError
}

describe('defaults', () => {
  it('gives the master Salt defaults when no file exists', async () => {
    const { opts, files, warnings } = await loadConfig('master', { configDir: dir })
    expect(files).toEqual([])
    expect(warnings).toEqual([])
    expect(opts).toMatchObject({
      interface: '0.0.0.0',
      publish_port: 4505,
      ret_port: 4506,
      transport: 'zeromq',
      transport_opts: {},
      worker_threads: 5,
      timeout: 5,
      gather_job_timeout: 10,
      auto_accept: false,
      open_mode: false,
      keep_jobs: 24,
      order_masters: false,
      syndic_wait: 5,
      master_job_cache: 'local_cache',
      job_cache: true,
      pub_hwm: 1000,
      max_frame_bytes: 67108864,
      sign_pub_messages: true,
      zmq_filtering: false,
      log_level: 'warning',
      root_dir: '/',
      pki_dir: '/etc/brine/pki/master',
      cachedir: '/var/cache/brine/master',
      sock_dir: '/var/run/brine/master',
      log_file: '/var/log/brine/master',
      log_level_logfile: null,
      pidfile: '/var/run/brine-master.pid',
      'postgres.port': 5432,
      rest_cherrypy: { host: '0.0.0.0' },
      master_id: null,
    })
    expect(opts).not.toHaveProperty('master')
    expect(opts).not.toHaveProperty('recon_default')
  })

  it('gives the minion its own keys, with Salt’s master: salt and an id from the host name', async () => {
    const { opts } = await loadConfig('minion', { configDir: dir })
    expect(opts).toMatchObject({
      id: hostname(),
      master: 'salt',
      master_port: 4506,
      master_type: 'str',
      return_retry_timer: 5,
      return_retry_timer_max: 10,
      return_retry_tries: 3,
      recon_default: 1000,
      recon_max: 10000,
      recon_randomize: true,
      acceptance_wait_time: 10,
      acceptance_wait_time_max: 0,
      auth_tries: 7,
      auth_timeout: 5,
      master_alive_interval: 0,
      master_failback: false,
      master_failback_interval: 0,
      random_master: false,
      master_finger: '',
      multiprocessing: true,
      grains: {},
      pki_dir: '/etc/brine/pki/minion',
    })
    expect(opts).not.toHaveProperty('auto_accept')
    expect(opts).not.toHaveProperty('ret_port')
    // No default: the minion subscribes where its master's auth reply says (Salt's minions do the same); set, it overrides that.
    expect(opts).not.toHaveProperty('publish_port')
    expect((await loadConfig('minion', { configDir: dir, overrides: { publish_port: 4605 } })).opts.publish_port).toBe(4605)
  })

  it('reads a cached minion_id file as Salt does', async () => {
    await write('minion_id', 'web1.example.com\n')
    const { opts } = await loadConfig('minion', { configDir: dir })
    expect(opts.id).toBe('web1.example.com')
  })

  it('gives the syndic master keys plus its upward connection keys', async () => {
    const { opts } = await loadConfig('syndic', { configDir: dir })
    expect(opts).toMatchObject({ syndic_master: 'masterofmasters', syndic_wait: 5, syndic_event_forward_timeout: 0.5, ret_port: 4506, recon_max: 10000 })
    expect(opts.pki_dir).toBe('/etc/brine/pki/syndic')
  })

  it("reads the syndic's keys from the master's config file, as Salt's salt-syndic does, and works in the master's cachedir and sock_dir", async () => {
    await write(
      'master',
      [
        'root_dir: /srv/node',
        'order_masters: true',
        'syndic_master: [top1, top2]',
        'syndic_master_port: 4606',
        'syndic_transport: tcp',
        'syndic_failover: ordered',
        'syndic_jid_forward_cache_hwm: 50',
        'syndic_log_file: /var/log/brine/relay',
        'log_file: /var/log/brine/master',
        'pidfile: /var/run/brine-master.pid',
        '',
      ].join('\n'),
    )
    await write('master.d/10-syndic.conf', 'syndic_pidfile: /var/run/relay.pid\n')
    const master = await loadConfig('master', { configDir: dir })
    // The master reads the syndic's keys without a warning.
    expect(master.warnings).toEqual([])
    const { opts, files } = await loadConfig('syndic', { configDir: dir })
    expect(files).toEqual([join(dir, 'master'), join(dir, 'master.d/10-syndic.conf')])
    expect(opts).toMatchObject({
      syndic_master: ['top1', 'top2'],
      syndic_master_port: 4606,
      syndic_transport: 'tcp',
      syndic_failover: 'ordered',
      syndic_jid_forward_cache_hwm: 50,
      syndic_spool_max_bytes: 268435456,
      cachedir: '/srv/node/var/cache/brine/master',
      sock_dir: '/srv/node/var/run/brine/master',
      pki_dir: '/srv/node/etc/brine/pki/syndic',
      log_file: '/srv/node/var/log/brine/relay',
      pidfile: '/srv/node/var/run/relay.pid',
    })
    expect(master.opts.log_file).toBe('/srv/node/var/log/brine/master')
    // As a minion learns its master's publish port from the auth reply, so does the syndic: absent unless set.
    expect(opts.syndic_master_publish_port).toBeUndefined()
    // Where the syndic's log file and pidfile were set is where --check-config points.
    const { sources } = await loadConfig('syndic', { configDir: dir })
    expect(sources.get('pidfile')).toEqual({ file: join(dir, 'master.d/10-syndic.conf'), line: 1 })
  })

  it("checks syndic_master as a multi-master minion's master list is checked, and ranges the syndic keys", async () => {
    const file = await write('master', 'syndic_master: [top1, top2, top1]\n')
    const error = await loadError('syndic')
    expect(error.message).toBe(`${file}:1: syndic_master lists 'top1' twice; each master may appear once`)
    expect([error.key, error.file, error.line]).toEqual(['syndic_master', file, 1])
    await write('master', 'syndic_jid_forward_cache_hwm: 0\n')
    expect((await loadError('syndic')).message).toMatch(/syndic_jid_forward_cache_hwm must be an integer from 1 to 1000000, got number 0$/)
    await write('master', 'syndic_master_publish_port: 0\n')
    expect((await loadError('syndic')).message).toMatch(/syndic_master_publish_port must be a port number \(an integer from 1 to 65535\), got number 0$/)
  })

  it("checks syndic_transport (null means the master's transport) and syndic_failover", async () => {
    expect((await loadConfig('syndic', { configDir: dir })).opts.syndic_transport).toBeNull()
    await write('master', 'syndic_transport: zmq\n')
    expect((await loadError('syndic')).message).toMatch(/did you mean 'zeromq'/)
    await write('master', 'syndic_failover: sometimes\n')
    expect((await loadError('syndic')).message).toMatch(/syndic_failover must be one of random, ordered/)
    expect(parseOverride('syndic_transport=null')).toEqual({ key: 'syndic_transport', value: null })
  })
})

describe('files and overrides', () => {
  it('applies the main file, then <role>.d/*.conf in sorted order, then overrides', async () => {
    await write('master', 'timeout: 30\nworker_threads: 8\nauto_accept: yes\n')
    await write('master.d/20-b.conf', 'worker_threads: 12\n')
    await write('master.d/10-a.conf', 'worker_threads: 10\ngather_job_timeout: 15\n')
    await write('master.d/ignored.txt', 'worker_threads: 99\n')
    const { opts, files } = await loadConfig('master', { configDir: dir, overrides: { timeout: 60 } })
    expect(files).toEqual([join(dir, 'master'), join(dir, 'master.d/10-a.conf'), join(dir, 'master.d/20-b.conf')])
    expect(opts.worker_threads).toBe(12)
    expect(opts.gather_job_timeout).toBe(15)
    expect(opts.timeout).toBe(60)
    // YAML 1.1, as Salt's PyYAML reads it.
    expect(opts.auto_accept).toBe(true)
  })

  it('treats an empty file as defaults', async () => {
    await write('minion', '# nothing yet\n')
    const { opts } = await loadConfig('minion', { configDir: dir })
    expect(opts.master).toBe('salt')
  })

  it('keeps rest_cherrypy defaults that a file does not set', async () => {
    await write('master', 'rest_cherrypy:\n  port: 8080\n')
    const { opts } = await loadConfig('master', { configDir: dir })
    expect(opts.rest_cherrypy).toEqual({ port: 8080, host: '0.0.0.0' })
  })

  it("reads Salt's batch_safe_limit and batch_safe_size, a size being a count or a percentage", async () => {
    expect((await loadConfig('master', { configDir: dir })).opts).toMatchObject({ batch_safe_limit: 0, batch_safe_size: '8' })
    await write('master', 'batch_safe_limit: 100\nbatch_safe_size: 10%\n')
    expect((await loadConfig('master', { configDir: dir })).opts).toMatchObject({ batch_safe_limit: 100, batch_safe_size: '10%' })
    await write('master', 'batch_safe_size: 4\n')
    expect((await loadConfig('master', { configDir: dir })).opts.batch_safe_size).toBe('4')
  })

  it('accepts a list of masters and str()s a numeric id', async () => {
    await write('minion', 'master: [m1, m2]\nid: 1234\n')
    const { opts } = await loadConfig('minion', { configDir: dir })
    expect(opts.master).toEqual(['m1', 'm2'])
    expect(opts.id).toBe('1234')
  })
})

describe('several masters (master, master_type, master_finger)', () => {
  it('reads the failover keys with their units and a master_finger as one string, a list or a mapping', async () => {
    await write(
      'minion',
      'master: [m1, m2]\nmaster_type: failover\nmaster_alive_interval: 2.5\nmaster_failback: true\nrandom_master: yes\nmaster_finger: [aa, ""]\n',
    )
    const { opts } = await loadConfig('minion', { configDir: dir })
    expect(opts).toMatchObject({
      master_type: 'failover',
      master_alive_interval: 2.5,
      master_failback: true,
      master_failback_interval: 0,
      random_master: true,
      master_finger: ['aa', ''],
    })
    await write('minion', 'master: [m1, m2]\nmaster_finger:\n  m2: bb\n')
    expect((await loadConfig('minion', { configDir: dir })).opts.master_finger).toEqual({ m2: 'bb' })
  })

  it('refuses failover with a single master given as a string, naming the key, the file and the line', async () => {
    const file = await write('minion', 'id: web1\nmaster: salt1\nmaster_type: failover\n')
    const error = await loadError('minion')
    expect(error.message).toBe(
      `${file}:2: master_type failover needs master to be a list of masters to fail over between (master: [salt1, other]), got the single master 'salt1'`,
    )
    expect([error.key, error.file, error.line]).toEqual(['master', file, 2])
  })

  it("points at master_type's line when master is Salt's default, and accepts a list of one", async () => {
    const file = await write('minion.d/failover.conf', 'master_alive_interval: 5\nmaster_type: failover\n')
    const error = await loadError('minion')
    expect([error.key, error.file, error.line]).toEqual(['master', file, 2])
    expect(error.message).toContain("got the single master 'salt'")
    await write('minion', 'master: [salt1]\n')
    expect((await loadConfig('minion', { configDir: dir })).opts.master).toEqual(['salt1'])
  })

  it('refuses a master listed twice and a master_finger that does not fit the masters', async () => {
    const file = await write('minion', 'master: [m1, m1]\n')
    expect((await loadError('minion')).message).toBe(`${file}:1: master lists 'm1' twice; each master may appear once`)
    await write('minion', 'master: [m1, m2]\n\nmaster_finger: [aa]\n')
    const short = await loadError('minion')
    expect([short.key, short.line]).toEqual(['master_finger', 3])
    expect(short.message).toContain('master_finger lists 1 fingerprint for 2 masters')
    await write('minion', 'master: [m1, m2]\nmaster_finger: {m3: aa}\n')
    expect((await loadError('minion')).message).toBe(`${file}:2: master_finger names 'm3', which master does not list (masters: m1, m2)`)
    await write('minion', 'master_finger: [aa, 1]\n')
    expect((await loadError('minion')).message).toBe(
      `${file}:1: master_finger must be a fingerprint, a list of fingerprints or a mapping of master to fingerprint, got a list`,
    )
  })

  it('checks command-line overrides the same way, naming the command line', async () => {
    const error = await loadError('minion', { master: 'm1', master_type: 'failover' })
    expect(error.message).toMatch(/^command line: master_type failover needs master to be a list/)
    const { opts } = await loadConfig('minion', {
      configDir: dir,
      overrides: parseOverrides(['master=[m1, m2]', 'master_type=failover', 'master_finger={m1: aa}']),
    })
    expect([opts.master, opts.master_finger]).toEqual([['m1', 'm2'], { m1: 'aa' }])
  })

  it('--check-config reports each of these problems once', async () => {
    await write('minion', 'master: m1\nmaster_type: failover\nmaster_finger: [aa, bb]\n')
    const { errors } = await checkConfig('minion', { configDir: dir })
    expect(errors.map((error) => [error.key, error.line])).toEqual([
      ['master', 1],
      ['master_finger', 3],
    ])
  })
})

describe('output keys', () => {
  it("leaves output and output_indent absent until set, as Salt's outputters expect, and checks output_indent's type", async () => {
    const { opts } = await loadConfig('master', { configDir: dir })
    expect(opts).not.toHaveProperty('output')
    expect(opts).not.toHaveProperty('output_indent')
    expect(opts).toMatchObject({ color: true, strip_colors: true })
    await write('master', 'output: json\noutput_indent: pretty\ncolor: false\n')
    expect((await loadConfig('master', { configDir: dir })).opts).toMatchObject({ output: 'json', output_indent: 'pretty', color: false })
    await write('master', 'output_indent: [1]\n')
    expect((await loadError('master')).message).toMatch(/master:1: output_indent must be an integer, pretty or null, got a list/)
    expect(parseOverride('output_indent=-1')).toEqual({ key: 'output_indent', value: -1 })
    expect(parseOverride('output_indent=null')).toEqual({ key: 'output_indent', value: null })
  })

  it("reads config files with Salt's loader: 0755 is decimal, dates stay text, 1e5 is a string", async () => {
    await write('minion', 'grains:\n  mode: 0755\n  built: 2024-01-31\n  ratio: 1e5\n  flag: on\n  letter: y\n')
    expect((await loadConfig('minion', { configDir: dir })).opts.grains).toEqual({ mode: 755, built: '2024-01-31', ratio: '1e5', flag: true, letter: 'y' })
  })
})

describe('root_dir', () => {
  it('prefixes every path key, leaving paths already under it and URLs alone', async () => {
    await write('master', `root_dir: ${dir}/root\ncachedir: ${dir}/root/cache\nlog_file: udp://loghost:514\nsock_dir: run/sock\n`)
    const { opts } = await loadConfig('master', { configDir: dir })
    expect(opts.pki_dir).toBe(`${dir}/root/etc/brine/pki/master`)
    expect(opts.cachedir).toBe(`${dir}/root/cache`)
    expect(opts.sock_dir).toBe(`${dir}/root/run/sock`)
    expect(opts.pidfile).toBe(`${dir}/root/var/run/brine-master.pid`)
    expect(opts.log_file).toBe('udp://loghost:514')
  })

  it('applies to command-line paths too', async () => {
    const { opts } = await loadConfig('minion', { configDir: dir, overrides: { root_dir: '/srv/root', pki_dir: '/keys' } })
    expect(opts.pki_dir).toBe('/srv/root/keys')
    expect(opts.cachedir).toBe('/srv/root/var/cache/brine/minion')
  })
})

describe('unknown keys', () => {
  it('warns with key, file and line, logs it, and keeps the value', async () => {
    const file = await write('master', 'timeout: 5\nworker_thread: 4\n')
    const lines: string[] = []
    const logger = createLogger({ level: 'warning', write: (line) => lines.push(line) })
    const { opts, warnings } = await loadConfig('master', { configDir: dir, logger })
    expect(warnings).toEqual([{ key: 'worker_thread', file, line: 2, message: `${file}:2: unknown config key 'worker_thread'; ignored` }])
    expect(lines).toHaveLength(1)
    expect(lines[0]).toContain(`${file}:2: unknown config key 'worker_thread'; ignored`)
    expect(opts.worker_thread).toBe(4)
  })

  it('warns about a key another role reads', async () => {
    const file = await write('minion', 'auto_accept: true\n')
    const { warnings } = await loadConfig('minion', { configDir: dir })
    expect(warnings.map((warning) => warning.message)).toEqual([`${file}:1: config key 'auto_accept' is not used by the minion; ignored`])
  })
})

describe('errors', () => {
  it('names key, file and line for a wrong type', async () => {
    const file = await write('master', 'interface: 127.0.0.1\n\npublish_port: abc\n')
    const error = await loadError('master')
    expect(error.message).toBe(`${file}:3: publish_port must be a port number (an integer from 0 to 65535), got string 'abc'`)
    expect(error.name).toBe('ConfigError')
    expect([error.key, error.file, error.line]).toEqual(['publish_port', file, 3])
  })

  it('checks the eauth and netapi keys: a list of client names, a flag or a mapping', async () => {
    const file = await write('master', 'netapi_enable_clients: local\n')
    expect((await loadError('master')).message).toBe(`${file}:1: netapi_enable_clients must be a list of strings, got string 'local'`)
    await write('master', 'token_expire_user_override: [alice]\n')
    expect((await loadError('master')).message).toBe(`${file}:1: token_expire_user_override must be true, false or a mapping, got a list`)
    await write('master', 'netapi_enable_clients: [local, runner]\ntoken_expire_user_override: {file: [alice]}\ntoken_expire: 60\n')
    const { opts } = await loadConfig('master', { configDir: dir })
    expect([opts.netapi_enable_clients, opts.token_expire_user_override, opts.token_expire]).toEqual([['local', 'runner'], { file: ['alice'] }, 60])
  })

  it('names the unit of a time key', async () => {
    const file = await write('master', 'timeout: [5]\n')
    expect((await loadError('master')).message).toBe(`${file}:1: timeout must be a number (seconds), got a list`)
  })

  it('checks keys inside an included file against that file', async () => {
    const file = await write('minion.d/50-x.conf', 'grains:\n  role: web\nmultiprocessing: maybe\n')
    expect((await loadError('minion')).message).toBe(`${file}:3: multiprocessing must be true or false, got string 'maybe'`)
  })

  it('names the command line for a bad override', async () => {
    expect((await loadError('master', { worker_threads: '5' })).message).toBe(`command line: worker_threads must be an integer, got string '5'`)
  })

  it('reports invalid YAML with file and line', async () => {
    const file = await write('master', 'timeout: 5\nauto_accept: true\n  bad: indent\n')
    const error = await loadError('master')
    expect(error.message).toMatch(new RegExp(`^${file}:2: invalid YAML: `))
    expect(error.line).toBe(2)
  })

  it('reports a duplicate key as invalid YAML', async () => {
    const file = await write('master', 'timeout: 5\ntimeout: 6\n')
    expect((await loadError('master')).message).toBe(`${file}:2: invalid YAML: Map keys must be unique`)
  })

  it('refuses a top level that is not a mapping', async () => {
    const file = await write('master', '- timeout\n')
    expect((await loadError('master')).message).toBe(`${file}:1: a config file must be a mapping of key: value`)
  })
})

describe('config files that cannot be read', () => {
  // brine-api reads the master's file, so the master's case covers it too.
  it.each(['master', 'minion', 'syndic'] as const)('%s: a symlink to nothing, a directory, a symlink loop: a ConfigError naming the path', async (role) => {
    const name = role === 'syndic' ? 'master' : role
    const file = join(dir, name)
    await symlink(join(dir, 'gone'), file)
    const dangling = await loadError(role)
    expect(dangling.message).toBe(`${file}: config file is a symbolic link to ${JSON.stringify(join(dir, 'gone'))}, which does not exist`)
    expect(dangling.file).toBe(file)
    await rm(file)
    await mkdir(file)
    expect((await loadError(role)).message).toBe(`${file}: cannot read config file: it is a directory, not a file`)
    await rm(file, { recursive: true })
    await symlink(file, file)
    const loop = await loadError(role)
    expect(loop.message).toMatch(new RegExp(`^${file}: cannot read config file: ELOOP`))
    // An included file is checked the same way.
    await rm(file)
    const include = join(dir, `${name}.d`, '50-x.conf')
    await mkdir(join(dir, `${name}.d`))
    await symlink(join(dir, 'nowhere'), include)
    expect((await loadError(role)).file).toBe(include)
  })

  it('reports it once among every other problem under --check-config', async () => {
    await symlink(join(dir, 'gone'), join(dir, 'master'))
    const { errors } = await checkConfig('master', { configDir: dir })
    expect(errors.map((error) => error.file)).toEqual([join(dir, 'master')])
  })
})

describe('checkConfig (--check-config)', () => {
  it('reports every problem of every file with its line, not just the first, and keeps loading', async () => {
    const main = await write('master', 'publish_port: lots\ntimeout: soon\nnot_a_key: 1\ntransport_opts:\n  tcp:\n    ret_port: -1\n    publish_port: x\n')
    const extra = await write('master.d/10-more.conf', 'auto_accept: maybe\ntransport: zmq\nlog_level_logfile: chatty\n')
    const { errors, warnings, files, opts } = await checkConfig('master', { configDir: dir })
    expect(files).toEqual([main, extra])
    expect(errors.map((error) => [error.file, error.line, error.key])).toEqual([
      [main, 1, 'publish_port'],
      [main, 2, 'timeout'],
      [main, 6, 'transport_opts.tcp.ret_port'],
      [main, 7, 'transport_opts.tcp.publish_port'],
      [extra, 1, 'auto_accept'],
      [extra, 2, 'transport'],
      [extra, 3, 'log_level_logfile'],
    ])
    expect(errors.every((error) => error.message.includes(`${error.file}:${error.line}`))).toBe(true)
    expect(errors[5]!.message).toContain("did you mean 'zeromq'?")
    expect(warnings.map((warning) => [warning.key, warning.line])).toEqual([['not_a_key', 3]])
    // The values in error were left out, so the defaults stand.
    expect(opts).toMatchObject({ publish_port: 4505, timeout: 5, auto_accept: false, transport: 'zeromq' })
  })

  it('reports each syntax error of a broken file and still checks the other files', async () => {
    const broken = await write('master', 'timeout: 5\ntimeout: 6\nkeep_jobs: 1\nkeep_jobs: 2\n')
    const other = await write('master.d/a.conf', 'worker_threads: many\n')
    const { errors } = await checkConfig('master', { configDir: dir })
    expect(errors.map((error) => error.message)).toEqual([
      `${broken}:2: invalid YAML: Map keys must be unique`,
      `${broken}:4: invalid YAML: Map keys must be unique`,
      `${other}:1: worker_threads must be an integer, got string 'many'`,
    ])
  })

  it('reports every port clash', async () => {
    await write('master', 'publish_port: 5000\nret_port: 5001\ntransport_opts:\n  tcp: {}\n')
    const { errors } = await checkConfig('master', { configDir: dir })
    expect(errors.map((error) => error.key)).toEqual(['publish_port', 'ret_port'])
  })

  it('finds nothing wrong with a clean config, and tells where each key came from', async () => {
    const file = await write('minion', 'id: web1\nmaster: 10.0.0.1\nlog_level_logfile: debug\n')
    const { errors, warnings, sources, opts } = await checkConfig('minion', { configDir: dir })
    expect(errors).toEqual([])
    expect(warnings).toEqual([])
    expect(sources.get('master')).toEqual({ file, line: 2 })
    expect(opts.log_level_logfile).toBe('debug')
  })

  it('still throws the first problem from loadConfig', async () => {
    const file = await write('master', 'publish_port: lots\ntimeout: soon\n')
    expect((await loadError('master')).message).toBe(`${file}:1: publish_port must be a port number (an integer from 0 to 65535), got string 'lots'`)
  })
})

describe('transport', () => {
  it.each([
    ['zmq', 'zeromq'],
    ['ZeroMQ', 'zeromq'],
    ['TCP', 'tcp'],
  ])('refuses %s with a did-you-mean %s', async (value, suggestion) => {
    const file = await write('master', `transport: ${value}\n`)
    const error = await loadError('master')
    expect(error.message).toBe(`unknown transport '${value}' at ${file}:1 (available: tcp, zeromq, nats); did you mean '${suggestion}'?`)
    expect(error.key).toBe('transport')
    expect((error.cause as Error).name).toBe('UnknownTransportError')
  })

  it('gives no suggestion for something far off', async () => {
    const file = await write('master', 'transport: carrier-pigeon\n')
    expect((await loadError('master')).message).toBe(`unknown transport 'carrier-pigeon' at ${file}:1 (available: tcp, zeromq, nats)`)
  })

  it('checks transport_opts names and their keys with the nested line', async () => {
    const file = await write('master', 'transport_opts:\n  tcp:\n    publish_port: 4605\n    ret_port: nope\n')
    expect((await loadError('master')).message).toBe(
      `${file}:4: transport_opts.tcp.ret_port must be a port number (an integer from 0 to 65535), got string 'nope'`,
    )
    const bad = await write('master', 'transport_opts:\n  zmq: {}\n')
    expect((await loadError('master')).message).toBe(`unknown transport 'zmq' at ${bad}:2 (available: tcp, zeromq, nats); did you mean 'zeromq'?`)
  })

  it('accepts two transports on distinct ports', async () => {
    await write('master', 'transport: zeromq\ntransport_opts:\n  zeromq: {}\n  tcp:\n    publish_port: 4605\n    ret_port: 4606\n')
    const { opts } = await loadConfig('master', { configDir: dir })
    expect(opts.transport_opts).toEqual({ zeromq: {}, tcp: { publish_port: 4605, ret_port: 4606 } })
  })

  it('refuses two transports on the same port, naming both keys', async () => {
    const file = await write('master', 'transport_opts:\n  zeromq: {}\n  tcp:\n    ret_port: 4606\n')
    const error = await loadError('master')
    expect(error.message).toBe(
      `${file}:3: transports 'zeromq' and 'tcp' both use publish_port 4505 ` +
        '(publish_port inherited by transport_opts.zeromq and publish_port inherited by transport_opts.tcp); give each transport its own port',
    )
    expect(error.key).toBe('publish_port inherited by transport_opts.tcp')
  })

  it('names the nested keys when both entries set the clashing port', async () => {
    const file = await write('master', 'transport_opts:\n  zeromq:\n    ret_port: 5000\n  tcp:\n    publish_port: 4605\n    ret_port: 5000\n')
    expect((await loadError('master')).message).toBe(
      `${file}:6: transports 'zeromq' and 'tcp' both use ret_port 5000 (transport_opts.zeromq.ret_port and transport_opts.tcp.ret_port); give each transport its own port`,
    )
  })
})

describe('nats', () => {
  it('serves zeromq, tcp and nats at once; nats shares the ports (they name its subjects) and takes its own keys', async () => {
    await write(
      'master',
      [
        'transport: zeromq',
        'transport_opts:',
        '  zeromq: {}',
        '  tcp:',
        '    publish_port: 4605',
        '    ret_port: 4606',
        '  nats:',
        '    nats_subject_prefix: site-a',
        'nats_servers: [nats://10.0.0.1:4222, nats://10.0.0.2:4222]',
        'nats_user: brine',
        'nats_password: s3cret',
        'nats_tls_ca: /etc/brine/nats-ca.pem',
        '',
      ].join('\n'),
    )
    const { opts } = await loadConfig('master', { configDir: dir })
    expect(opts.transport_opts.nats).toEqual({ nats_subject_prefix: 'site-a' })
    expect(brokerFromConfig({ ...opts, ...opts.transport_opts.nats })).toEqual({
      servers: ['nats://10.0.0.1:4222', 'nats://10.0.0.2:4222'],
      subjectPrefix: 'site-a',
      user: 'brine',
      password: 's3cret',
      tlsCa: '/etc/brine/nats-ca.pem',
    })
  })

  it('defaults to one local server under the prefix brine, and takes transport: nats on a minion', async () => {
    await write('minion', 'transport: nats\nnats_token: t0ken\n')
    const { opts } = await loadConfig('minion', { configDir: dir })
    expect(opts.transport).toBe('nats')
    expect(endpointLimitsFromConfig(opts).broker).toEqual({ servers: ['nats://127.0.0.1:4222'], subjectPrefix: 'brine', token: 't0ken' })
  })

  it('refuses nats_servers that is not a list of strings, naming the line', async () => {
    const file = await write('master', 'nats_servers: {a: 1}\n')
    expect((await loadError('master')).message).toBe(`${file}:1: nats_servers must be a list of strings, got a mapping`)
  })
})

describe('parseOverride', () => {
  it.each([
    ['timeout=30', 'timeout', 30],
    ['syndic_event_forward_timeout=0.25', 'syndic_event_forward_timeout', 0.25],
    ['publish_port=4605', 'publish_port', 4605],
    ['auto_accept=yes', 'auto_accept', true],
    ['open_mode=False', 'open_mode', false],
    ['interface=127.0.0.1', 'interface', '127.0.0.1'],
    ['id=web=1', 'id', 'web=1'],
    ['master=[a, b]', 'master', ['a', 'b']],
    ['master=m1', 'master', 'm1'],
    ['master_finger=ab:cd', 'master_finger', 'ab:cd'],
    ['master_finger=[ab, ""]', 'master_finger', ['ab', '']],
    // PyYAML's YAML 1.1: `on` is a boolean, `n` is a string.
    ['grains={role: web, n: 2, ssd: on}', 'grains', { role: 'web', n: 2, ssd: true }],
    ['master_id=', 'master_id', null],
    ['custom_key=12', 'custom_key', 12],
  ])('%s', (text, key, value) => {
    expect(parseOverride(text)).toEqual({ key, value })
  })

  it.each([
    ['timeout=soon', "command line: timeout must be a number (seconds), got 'soon'"],
    ['worker_threads=2.5', "command line: worker_threads must be an integer, got '2.5'"],
    ['publish_port=70000', 'command line: publish_port must be a port number (an integer from 0 to 65535), got number 70000'],
    ['auto_accept=maybe', "command line: auto_accept must be true or false (true/false, yes/no, on/off, 1/0), got 'maybe'"],
    ['grains=[1, 2]', 'command line: grains must be a mapping, got a list'],
    ['timeout', "command line: override 'timeout' must look like key=value"],
  ])('refuses %s', (text, message) => {
    expect(() => parseOverride(text)).toThrow(ConfigError)
    expect(() => parseOverride(text)).toThrow(message)
  })

  it('builds the overrides object loadConfig takes', async () => {
    const overrides = parseOverrides(['timeout=9', 'transport=tcp'])
    const { opts } = await loadConfig('master', { configDir: dir, overrides })
    expect([opts.timeout, opts.transport]).toEqual([9, 'tcp'])
  })
})

describe('ranges and paths (config that cannot work is refused at load, naming key, file and line)', () => {
  it.each([
    ['master', 'worker_threads: 100000\n', 'worker_threads must be an integer from 0 to 128, got number 100000'],
    ['master', 'max_frame_bytes: 0\n', 'max_frame_bytes must be an integer from 65536 to 1073741824 (bytes), got number 0'],
    ['master', 'max_frame_bytes: -1\n', 'max_frame_bytes must be an integer from 65536 to 1073741824 (bytes), got number -1'],
    ['master', 'pub_hwm: 0\n', 'pub_hwm must be an integer from 1 to 1000000, got number 0'],
    ['master', 'timeout: -5\n', 'timeout must be a number from 0 to 2147483 (seconds), got number -5'],
    ['master', 'gather_job_timeout: 0\n', 'gather_job_timeout must be a number from 0.1 to 2147483 (seconds), got number 0'],
    ['master', 'publish_session: 3000000\n', 'publish_session must be a number from 1 to 2147483 (seconds), got number 3000000'],
    ['master', 'keep_jobs: -1\n', 'keep_jobs must be a number from 0 to 876000 (hours), got number -1'],
    ['minion', 'return_retry_timer: 0\n', 'return_retry_timer must be a number from 0.1 to 2147483 (seconds), got number 0'],
    ['minion', 'recon_default: 0\n', 'recon_default must be an integer from 10 to 2147483647 (milliseconds), got number 0'],
    ['minion', 'auth_tries: 0\n', 'auth_tries must be an integer from 1 to 1000, got number 0'],
    ['minion', 'master_port: 0\n', 'master_port must be a port number (an integer from 1 to 65535), got number 0'],
    ['master', 'root_dir: 5\n', 'root_dir must be a path (a string), got number 5'],
    ['minion', 'cachedir: 12\n', 'cachedir must be a path (a string), got number 12'],
  ] as const)('%s: %j', async (role, text, message) => {
    const file = await write(role, text)
    const error = await loadError(role)
    expect(error.message).toBe(`${file}:1: ${message}`)
    expect([error.file, error.line]).toEqual([file, 1])
  })

  it('gives every numeric key of the schema a range', async () => {
    const { CONFIG_SCHEMA } = await import('../src/config-schema.js')
    const unbounded = Object.entries(CONFIG_SCHEMA)
      .filter(([, spec]) => spec.kind === 'integer' || spec.kind === 'number')
      .filter(([, spec]) => !('min' in spec) || !('max' in spec))
      .map(([key]) => key)
    expect(unbounded).toEqual([])
  })

  it('applies the ranges to command-line values and to transport_opts entries', async () => {
    expect(() => parseOverride('worker_threads=100000')).toThrow('command line: worker_threads must be an integer from 0 to 128, got number 100000')
    expect(() => parseOverride('timeout=-1')).toThrow('command line: timeout must be a number from 0 to 2147483 (seconds), got number -1')
    const file = await write('master', 'transport_opts:\n  tcp:\n    max_frame_bytes: 10\n')
    expect((await loadError('master')).message).toBe(
      `${file}:3: transport_opts.tcp.max_frame_bytes must be an integer from 65536 to 1073741824 (bytes), got number 10`,
    )
  })

  it('accepts the bounds themselves', async () => {
    await write('master', 'worker_threads: 128\nmax_frame_bytes: 65536\ntimeout: 0\nkeep_jobs: 0\n')
    const { opts } = await loadConfig('master', { configDir: dir })
    expect(opts).toMatchObject({ worker_threads: 128, max_frame_bytes: 65536, timeout: 0, keep_jobs: 0 })
  })

  it('refuses a root_dir on /proc or /sys once, naming root_dir, and any path key that lands there', async () => {
    const file = await write('master', 'root_dir: /proc/self\n')
    const error = await loadError('master')
    expect(error.message).toBe(
      `${file}:1: root_dir /proc/self is on /proc, a virtual filesystem that cannot hold Brine's files; choose a directory on a real filesystem`,
    )
    expect(error.key).toBe('root_dir')
    const check = await checkConfig('master', { configDir: dir })
    expect(check.errors.map((e) => e.key)).toEqual(['root_dir'])

    const minion = await write('minion', 'pki_dir: /sys/kernel/brine\n')
    const pki = await loadError('minion')
    expect(pki.message).toBe(
      `${minion}:1: pki_dir /sys/kernel/brine is on /sys, a virtual filesystem that cannot hold Brine's files; choose a directory on a real filesystem`,
    )
    expect(() => parseOverride('root_dir=/tmp/x\u0000y')).toThrow('root_dir must be a path without NUL bytes')
    expect(() => parseOverride(`log_file=/${'a'.repeat(5000)}`)).toThrow('log_file is 5001 bytes long; a path may be at most 4095')
  })

  it('keeps root_dir working for a real directory and leaves log URLs alone', async () => {
    await write('master', `root_dir: ${dir}\nlog_file: udp://127.0.0.1:514\n`)
    const { opts } = await loadConfig('master', { configDir: dir })
    expect(opts.pki_dir).toBe(join(dir, 'etc/brine/pki/master'))
    expect(opts.log_file).toBe('udp://127.0.0.1:514')
  })
})
