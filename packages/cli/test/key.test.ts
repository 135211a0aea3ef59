import { mkdtemp, readFile, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fingerprint, parsePublicKeys } from '@brine/crypt'
import { parseKeyArgs, runKey, type KeyWheel } from '../src/commands/key.js'
import { keyOutput } from '../src/output/index.js'
import { memoryIO } from './helpers.js'

// Ordered as @brine/master's key store lists them.
const LISTING = { minions_pre: ['web9', 'db2', 'db1'], minions: ['web1'], minions_rejected: [], minions_denied: ['evil'] }
const PUB = '-----BEGIN BRINE PUBLIC KEYS-----\nbox: AAAA\nsign: BBBB\n-----END BRINE PUBLIC KEYS-----\n'

/** A master stand-in answering wheel loads the way @brine/master's wheel does. */
function fakeWheel(listing: Record<string, string[]> = LISTING): KeyWheel & { loads: Record<string, unknown>[] } {
  const client = {
    loads: [] as Record<string, unknown>[],
    async cmd(fun: string, kwarg: Record<string, unknown> = {}) {
      const load: Record<string, unknown> = { cmd: 'wheel', fun, ...kwarg }
      client.loads.push(load)
      if (fun === 'key.list_all') return listing
      if (fun === 'key.accept') return { minions: load.match }
      if (fun === 'key.accept_syndic') return { syndics: load.match }
      if (fun === 'key.reject') return { minions_rejected: load.match }
      if (fun === 'key.delete') return { minions_pre: load.match }
      if (fun === 'key.finger') return { minions: { web1: 'aa:bb' }, minions_pre: { db1: 'cc:dd' } }
      if (fun === 'key.print') return (load.match as string[]).some((glob) => glob === 'web1' || glob === '*') ? { minions: { web1: PUB } } : {}
      throw new Error(`unexpected ${fun}`)
    },
    async close() {},
  }
  return client
}

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'brine-key-'))
})
afterAll(() => rm(dir, { recursive: true, force: true }))

/** Runs brine-key against the stand-in with an empty config dir. */
async function key(argv: string[], options: { answers?: string[]; tty?: boolean; listing?: Record<string, string[]> } = {}) {
  const io = memoryIO(options)
  const client = fakeWheel(options.listing)
  const code = await runKey(['-c', dir, ...argv], io, { createClient: () => client })
  return { code, out: io.out(), err: io.err(), loads: client.loads }
}

describe('brine-key listings', () => {
  it('lists keys as salt-key does, -l taking every word Salt accepts by its prefix', async () => {
    expect(keyOutput(LISTING)).toBe('Accepted Keys:\nweb1\nDenied Keys:\nevil\nUnaccepted Keys:\ndb1\ndb2\nweb9\nRejected Keys:\n')
    expect(await key(['-L'])).toMatchObject({ code: 0, out: 'Accepted Keys:\nweb1\nDenied Keys:\nevil\nUnaccepted Keys:\ndb1\ndb2\nweb9\nRejected Keys:\n' })
    for (const word of ['un', 'unaccepted', 'pre', 'pending']) {
      const pending = await key(['-l', word])
      if (word === 'pending') {
        expect(pending.code).toBe(64)
        continue
      }
      expect(pending).toMatchObject({ code: 0, out: 'Unaccepted Keys:\ndb1\ndb2\nweb9\n' })
    }
    expect((await key(['-l', 'acc'])).out).toBe('Accepted Keys:\nweb1\n')
    expect((await key(['-l', 'accepted'])).out).toBe('Accepted Keys:\nweb1\n')
    expect((await key(['-l', 'den'])).out).toBe('Denied Keys:\nevil\n')
    expect((await key(['-l', 'rej'])).out).toBe('Rejected Keys:\n')
    expect((await key(['-l', 'all'])).out).toMatch(/^Accepted Keys:\nweb1\nDenied Keys:/)
  })

  it("prints listings with --out json, yaml and raw in Salt's state order and text", async () => {
    expect((await key(['-L', '--out', 'json'])).out).toBe(
      '{\n    "minions": [\n        "web1"\n    ],\n    "minions_pre": [\n        "db1",\n        "db2",\n        "web9"\n    ],\n    "minions_rejected": [],\n    "minions_denied": [\n        "evil"\n    ]\n}\n',
    )
    expect((await key(['-l', 'acc', '--out', 'json', '--out-indent', '-1'])).out).toBe('{"minions": ["web1"]}\n')
    expect((await key(['-L', '--out', 'yaml'])).out).toBe(
      'minions:\n- web1\nminions_denied:\n- evil\nminions_pre:\n- db1\n- db2\n- web9\nminions_rejected: []\n',
    )
    expect((await key(['-L', '--out', 'raw'])).out).toBe(
      "{'minions': ['web1'], 'minions_pre': ['db1', 'db2', 'web9'], 'minions_rejected': [], 'minions_denied': ['evil']}\n",
    )
  })

  it('colours the listing with the key outputter colours when forced', async () => {
    expect((await key(['-l', 'acc', '--force-color'])).out).toBe('\x1b[0;1;32mAccepted Keys:\x1b[0;0m\n\x1b[0;32mweb1\x1b[0;0m\n')
  })

  it('prints fingerprints (-f, -F) and public keys (-p, -P), and nothing for a glob that matches nothing', async () => {
    const fingers = await key(['-F'])
    expect(fingers).toMatchObject({ code: 0, out: 'Accepted Keys:\nweb1:  aa:bb\nUnaccepted Keys:\ndb1:  cc:dd\n' })
    expect(fingers.loads.at(-1)).toEqual({ cmd: 'wheel', fun: 'key.finger', match: ['*'] })
    const printed = await key(['-p', 'web1,db9'])
    expect(printed.out).toBe(`Accepted Keys:\nweb1:  ${PUB}`)
    expect(printed.loads.at(-1)).toEqual({ cmd: 'wheel', fun: 'key.print', match: ['web1', 'db9'] })
    expect(await key(['-p', 'nobody'])).toMatchObject({ code: 0, out: '' })
    expect((await key(['-p', 'nobody', '--out', 'json'])).out).toBe('{}\n')
    expect((await key(['-P', '--out', 'json'])).out).toBe(`{\n    "minions": {\n        "web1": ${JSON.stringify(PUB)}\n    }\n}\n`)
  })
})

describe('brine-key accept, reject and delete', () => {
  it('shows the keys about to be accepted, also with -y, then accepts exactly those', async () => {
    const run = await key(['-a', 'db*', '-y'])
    expect(run.code).toBe(0)
    expect(run.out).toBe(
      'The following keys are going to be accepted:\nUnaccepted Keys:\ndb1\ndb2\nKey for minion db1 accepted.\nKey for minion db2 accepted.\n',
    )
    expect(run.loads[1]).toEqual({ cmd: 'wheel', fun: 'key.accept', match: ['db1', 'db2'] })
    const listed = await key(['-a', 'db1,web9', '-y', '--out', 'json'])
    expect(listed.out).toBe(
      'The following keys are going to be accepted:\n{\n    "minions_pre": [\n        "db1",\n        "web9"\n    ]\n}\nKey for minion db1 accepted.\nKey for minion web9 accepted.\n',
    )
  })

  it('asks before deleting on a terminal (default no), and refuses without one with exit 64', async () => {
    const yes = await key(['-d', 'web9'], { answers: ['y'] })
    expect(yes).toMatchObject({
      code: 0,
      out: 'The following keys are going to be deleted:\nUnaccepted Keys:\nweb9\nProceed? [N/y] Key for minion web9 deleted.\n',
    })
    const declined = await key(['-d', 'web9'], { answers: [''] })
    expect(declined.code).toBe(0)
    expect(declined.loads.map((load) => load.fun)).toEqual(['key.list_all'])
    const accepted = await key(['-A'], { answers: [''] })
    expect(accepted.out).toMatch(/Proceed\? \[n\/Y\] Key for minion db1 accepted\.\nKey for minion db2 accepted\.\nKey for minion web9 accepted\.\n$/)
    const noTTY = await key(['-A'])
    expect(noTTY.code).toBe(64)
    expect(noTTY.err).toMatch(/use -y/)
    expect(noTTY.loads.map((load) => load.fun)).toEqual(['key.list_all'])
  })

  it('says what Salt says when nothing matches, on stdout, and exits 0 as salt-key does', async () => {
    const none = await key(['-a', 'nope*', '-y'])
    expect(none).toMatchObject({ code: 0, out: "The key glob 'nope*' does not match any unaccepted keys.\n", err: '' })
    expect(none.loads.map((load) => load.fun)).toEqual(['key.list_all'])
    expect((await key(['-a', 'nope', '-y', '--include-rejected'])).out).toBe("The key glob 'nope' does not match any unaccepted or rejected keys.\n")
    expect((await key(['-r', 'nope', '-y', '--include-all', '--include-denied'])).out).toBe(
      "The key glob 'nope' does not match any unaccepted, accepted or denied keys.\n",
    )
    // An accepted key is not rejected without --include-accepted, as in Salt.
    expect((await key(['-r', 'web1', '-y'])).out).toBe("The key glob 'web1' does not match any unaccepted keys.\n")
    const included = await key(['-r', 'web1', '-y', '--include-accepted'])
    expect(included.out).toBe('The following keys are going to be rejected:\nAccepted Keys:\nweb1\nKey for minion web1 rejected.\n')
    expect(included.loads[1]).toEqual({ cmd: 'wheel', fun: 'key.reject', match: ['web1'], include_accepted: true })
  })
})

describe('brine-key and syndic keys', () => {
  const withSyndic = { ...LISTING, minions: ['syn1', 'web1'], syndics: ['syn1'] }

  it('--accept-syndic shows the pending and accepted keys it marks, asks, then marks exactly those', async () => {
    const run = await key(['--accept-syndic', 'db1,web1', '-y'])
    expect(run.code).toBe(0)
    expect(run.out).toBe(
      'The following keys are going to be accepted as syndics:\nAccepted Keys:\nweb1\nUnaccepted Keys:\ndb1\nKey for syndic db1 accepted.\nKey for syndic web1 accepted.\n',
    )
    expect(run.loads[1]).toEqual({ cmd: 'wheel', fun: 'key.accept_syndic', match: ['db1', 'web1'] })
    // Denied and rejected keys are not candidates; without a terminal it refuses to go on unasked.
    expect((await key(['--accept-syndic', 'evil', '-y'])).out).toBe("The key glob 'evil' does not match any unaccepted or accepted keys.\n")
    expect(await key(['--accept-syndic', 'db1'])).toMatchObject({ code: 64 })
    expect((await key(['--accept-syndic', 'db1'], { tty: true, answers: ['n'] })).loads.map((load) => load['fun'])).toEqual(['key.list_all'])
  })

  it('-L lists syndic keys after the four states, and -l syn lists them alone', async () => {
    expect((await key(['-L'], { listing: withSyndic })).out).toBe(
      'Accepted Keys:\nsyn1\nweb1\nDenied Keys:\nevil\nUnaccepted Keys:\ndb1\ndb2\nweb9\nRejected Keys:\nSyndic Keys:\nsyn1\n',
    )
    expect((await key(['-l', 'syn'], { listing: withSyndic })).out).toBe('Syndic Keys:\nsyn1\n')
    // Without syndics, the listing is exactly salt-key's.
    expect((await key(['-L', '--out', 'json'])).out).not.toContain('syndics')
  })
})

describe('brine-key and awkward ids', () => {
  const listing = { minions_pre: ['x[1]', 'wеb1'], minions: ['x1', 'web1'], minions_rejected: [], minions_denied: [] }

  it('matches a key by its exact name before reading it as a glob', async () => {
    const literal = await key(['-d', 'x[1]', '-y'], { listing })
    expect(literal.out).toBe('The following keys are going to be deleted:\nUnaccepted Keys:\nx[1]\nKey for minion x[1] deleted.\n')
    expect(literal.loads[1]).toEqual({ cmd: 'wheel', fun: 'key.delete', match: ['x[1]'] })
    // A pattern that names no key is still Salt's glob.
    const glob = await key(['-d', 'x[0-9]', '-y'], { listing })
    expect(glob.loads[1]).toEqual({ cmd: 'wheel', fun: 'key.delete', match: ['x1'] })
  })

  it('warns on stderr about ids that mix scripts, spelling them out, and leaves the listing as Salt prints it', async () => {
    const listed = await key(['-L'], { listing })
    expect(listed.out).toBe('Accepted Keys:\nweb1\nx1\nDenied Keys:\nUnaccepted Keys:\nwеb1\nx[1]\nRejected Keys:\n')
    expect(listed.err).toBe('brine-key: warning: minion id "wеb1" (w\\u{435}b1) mixes scripts (Latin, Cyrillic); it may imitate another id\n')
    const accepting = await key(['-a', 'w*', '-y'], { listing })
    expect(accepting.err).toContain('w\\u{435}b1')
    expect((await key(['-l', 'acc'], { listing })).err).toBe('')
  })
})

describe('brine-key --gen-keys', () => {
  it('writes a key pair where --gen-keys-dir says, prints its fingerprint as Salt does, and keeps an existing pair', async () => {
    const first = await key(['--gen-keys', 'minibar', '--gen-keys-dir', dir])
    expect(first.code).toBe(0)
    const pub = await readFile(join(dir, 'minibar.pub'), 'utf8')
    const finger = fingerprint(parsePublicKeys(pub, 'minibar.pub'))
    expect(first.out).toBe(`return:\n    ${finger}\n`)
    expect((await stat(join(dir, 'minibar.key'))).mode & 0o777).toBe(0o600)
    expect(first.loads).toEqual([])
    const again = await key(['--gen-keys', 'minibar', '--gen-keys-dir', dir, '--out', 'json'])
    expect(again.out).toBe(`{\n    "return": "${finger}"\n}\n`)
    const bad = await key(['--gen-keys', '../escape', '--gen-keys-dir', dir])
    expect(bad.code).toBe(1)
    expect(bad.err).toMatch(/key name/)
  })
})

describe('brine-key --keysize', () => {
  it("refuses Salt's out-of-range sizes with Salt's sentences, and says an in-range size is not used", async () => {
    for (const [size, sentence] of [
      ['1024', 'The minimum value for keysize is 2048'],
      ['32769', 'The maximum value for keysize is 32768'],
    ]) {
      const io = memoryIO()
      expect(parseKeyArgs(['--gen-keys', 'minibar', '--gen-keys-dir', dir, '--keysize', size!], io)).toBe(64)
      expect(io.err()).toBe(`Usage: brine-key [options]\n\nbrine-key: error: ${sentence}\n`)
    }
    const used = await key(['--gen-keys', 'sized', '--gen-keys-dir', dir, '--keysize', '4096'])
    expect(used.code).toBe(0)
    expect(used.err).toBe("brine-key: note: --keysize is not used: Brine's keys are X25519 and Ed25519, of one size each\n")
    expect(used.out).toMatch(/^return:\n    [0-9a-f:]+\n$/)
  })
})

describe('brine-key usage errors', () => {
  it("exits 64 with Salt's usage layout for a bad -l word, two actions, and an unknown option", () => {
    const bad = memoryIO()
    expect(parseKeyArgs(['-l', 'foo-acc'], bad)).toBe(64)
    expect(bad.err()).toBe("Usage: brine-key [options]\n\nbrine-key: error: 'foo-acc' is not a valid argument to '--list'\n")
    const two = memoryIO()
    expect(parseKeyArgs(['-A', '-D'], two)).toBe(64)
    expect(two.err()).toMatch(/one action at a time/)
    const unknown = memoryIO()
    expect(parseKeyArgs(['--bogus'], unknown)).toBe(64)
    expect(unknown.err()).toBe("Usage: brine-key [options]\n\nbrine-key: error: unknown option '--bogus'\n")
  })

  it("takes Salt's documented `-F master` as -F, and refuses a stray word anywhere else instead of ignoring it", async () => {
    const fingers = await key(['-F', 'master'])
    expect(fingers).toMatchObject({ code: 0, out: 'Accepted Keys:\nweb1:  aa:bb\nUnaccepted Keys:\ndb1:  cc:dd\n' })
    expect(fingers.loads.at(-1)).toEqual({ cmd: 'wheel', fun: 'key.finger', match: ['*'] })
    const stray = memoryIO()
    expect(parseKeyArgs(['-d', 'web1', 'web2'], stray)).toBe(64)
    expect(stray.err()).toBe(
      'Usage: brine-key [options]\n\nbrine-key: error: unexpected argument: web2 (globs go after their option: -a GLOB, -d GLOB, -f GLOB, …)\n',
    )
    const two = memoryIO()
    expect(parseKeyArgs(['-F', 'master', 'web1'], two)).toBe(64)
    expect(two.err()).toMatch(/unexpected arguments: master web1/)
  })
})
