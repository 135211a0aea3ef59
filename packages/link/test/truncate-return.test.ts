/**
 * Big returns are cut to fit one frame instead of being lost, and a spool write that fails on a full
 * disk leaves no temporary file. The wire behaviour (a minion's big cmd.run reaching a master on both
 * transports) is in minion-limits.test.ts; the 70 MB case through the CLI in test-e2e/limits.test.ts.
 */
import { execFileSync } from 'node:child_process'
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ReturnLoad } from '@brine/protocol'
import { generateKeys, PeerBox } from '@brine/crypt'
import { decode, encode, encodeEnvelope, EnvelopeKind, silentLogger, type WireValue } from '@brine/core'
import { ReturnSpool, encodedBytes, fitReturn, mayNeedFitting, RETURN_FRAME_RESERVE_BYTES } from '@brine/link'

const MIB = 1024 * 1024
const load = (value: unknown, extra: Partial<ReturnLoad> = {}): ReturnLoad => ({
  cmd: '_return',
  id: 'web1',
  jid: '20240101000000000001',
  fun: 'cmd.run',
  fun_args: ['yes | head -c 3000000'],
  return: value,
  retcode: 0,
  success: true,
  ...extra,
})

/** The frame the minion really sends: the load sealed to the master, in a request envelope. */
function sealedFrameBytes(fitted: ReturnLoad): number {
  const minion = generateKeys()
  const master = generateKeys()
  const box = new PeerBox({ id: fitted.id, role: 'minion', secretKey: minion.box.secretKey, peerPublicKey: master.box.publicKey })
  return encodeEnvelope({ kind: EnvelopeKind.Request, id: 2 ** 40, body: box.seal(fitted) }, Number.MAX_SAFE_INTEGER).length
}

describe('mayNeedFitting', () => {
  it('clears without encoding only returns that surely fit, whatever their characters and shapes', () => {
    const limit = 64 * 1024
    const budget = limit - RETURN_FRAME_RESERVE_BYTES
    const shapes: unknown[] = [
      'x'.repeat(budget - 400),
      '\u{1F600}'.repeat(Math.floor((budget - 400) / 4)), // 4 bytes of UTF-8 per 2 UTF-16 units
      '\u00e9\u4e2d'.repeat(Math.floor((budget - 400) / 5)),
      Array.from({ length: 3000 }, (_, index) => index * 1.5),
      { nested: { deeper: [null, true, false, 2 ** 40, -1, 'ok', new Uint8Array(9000)] }, 'k\u00e9y': 'v' },
      Object.fromEntries(Array.from({ length: 2000 }, (_, index) => [`key${index}`, index])),
    ]
    let cleared = 0
    for (const value of shapes) {
      const ret = load(value)
      if (mayNeedFitting(ret, limit)) continue
      cleared++
      // Cleared means it fits: the bound is never below the real size.
      expect(encodedBytes(ret)).toBeLessThanOrEqual(budget)
      expect(fitReturn(ret, limit).truncated).toBe(false)
    }
    expect(cleared).toBeGreaterThan(0)
    // Near or over the budget, or a value it cannot bound (a class instance), is left to fitReturn.
    expect(mayNeedFitting(load('x'.repeat(budget)), limit)).toBe(true)
    expect(mayNeedFitting(load(new Date(0)), limit)).toBe(true)
    expect(mayNeedFitting(load('hello'), limit)).toBe(false)
  })
})

describe('encodedBytes', () => {
  it('is exactly the encoded length, long strings of every width and at every header boundary included', () => {
    const ascii = (bytes: number): string => 'y'.repeat(bytes)
    const values: unknown[] = [
      load(ascii(3 * MIB)),
      load({ pid: 7, retcode: 3, stdout: ascii(2 * MIB), stderr: 'e'.repeat(70_000) }),
      // UTF-8 lengths on each side of str16/str32 (0x10000 bytes) from strings of fewer characters than bytes.
      ...[0xffff, 0x10000, 0x10001].map((bytes) => 'é'.repeat(Math.floor(bytes / 2)) + ascii(bytes % 2)),
      ['€'.repeat(1500), '😀'.repeat(800), `${'a'.repeat(1200)}\ud800${'b'.repeat(10)}`, ascii(1023), ascii(1024), ascii(255), ascii(256)],
      { nested: [[{ deep: ascii(5000) }]], bytes: Buffer.alloc(4000, 1), map: new Map([['k', ascii(2000)]]), nothing: null, gone: undefined },
      Object.assign(Object.create(null) as Record<string, unknown>, { long: ascii(4096), n: 1.5 }),
      ascii(100_000),
    ]
    for (const value of values) expect(encodedBytes(value)).toBe(encode(value as WireValue).length)
  })
})

describe('fitReturn', () => {
  it('leaves a return that fits untouched (the same object)', () => {
    const small = load('hello')
    const fitted = fitReturn(small, MIB)
    expect(fitted).toMatchObject({ truncated: false, load: small })
    expect(fitted.load).toBe(small)
  })

  it('cuts a cmd.run output below the frame limit, ends it with a marker, and keeps retcode and success', () => {
    const output = 'y\n'.repeat(1_500_000) // 3,000,000 bytes
    const original = load(output, { retcode: 3, success: false })
    const fitted = fitReturn(original, MIB)
    expect(fitted.truncated).toBe(true)
    expect(fitted.originalBytes).toBeGreaterThan(3_000_000)
    expect(fitted.bytes).toBeLessThanOrEqual(MIB - RETURN_FRAME_RESERVE_BYTES)
    expect(sealedFrameBytes(fitted.load)).toBeLessThanOrEqual(MIB)
    const text = fitted.load.return as string
    expect(text.startsWith('y\ny\n')).toBe(true)
    expect(text).toMatch(/\n\[brine: truncated by the minion: 3000000 bytes, the first \d+ kept, to fit max_frame_bytes \(1048576\)\]$/)
    const kept = Number(/the first (\d+) kept/.exec(text)![1])
    expect(kept).toBeGreaterThan(MIB / 2)
    expect(text.startsWith(output.slice(0, kept))).toBe(true)
    expect(fitted.load).toMatchObject({ retcode: 3, success: false, jid: original.jid, fun: 'cmd.run', fun_args: original.fun_args })
    expect(original.return).toBe(output) // the caller's load is not changed
  })

  it('cuts the long part of a cmd.run_all dict and keeps its short parts whole', () => {
    const fitted = fitReturn(load({ pid: 42, retcode: 1, stdout: 'o'.repeat(2 * MIB), stderr: 'short error' }, { fun: 'cmd.run_all', retcode: 1 }), MIB)
    const value = fitted.load.return as Record<string, unknown>
    expect(value).toMatchObject({ pid: 42, retcode: 1, stderr: 'short error' })
    expect(value.stdout as string).toMatch(/\[brine: truncated by the minion: 2097152 bytes/)
    expect(fitted.bytes).toBeLessThanOrEqual(MIB - RETURN_FRAME_RESERVE_BYTES)
  })

  it("keeps cmd.*'s own cap marker and cuts before it", () => {
    const capped = `${'y'.repeat(2 * MIB)}\n[brine: output truncated at ${2 * MIB} bytes]`
    const text = fitReturn(load(capped), MIB).load.return as string
    expect(text).toMatch(
      /^y+\n\[brine: output truncated at 2097152 bytes\]\n\[brine: truncated by the minion: 2097152 bytes, the first \d+ kept, to fit max_frame_bytes \(1048576\)\]$/,
    )
  })

  it('never splits a multi-byte character', () => {
    const fitted = fitReturn(load('é'.repeat(MIB)), 256 * 1024)
    const text = fitted.load.return as string
    expect(text.includes('\ufffd')).toBe(false)
    expect(text.slice(0, text.indexOf('\n['))).toMatch(/^é+$/)
  })

  it('replaces a return of many small items by the start of its JSON text, marked', () => {
    const many = Array.from({ length: 200_000 }, (_, index) => `f${index}`)
    const fitted = fitReturn(load(many, { fun: 'file.find' }), 256 * 1024)
    expect(typeof fitted.load.return).toBe('string')
    expect(fitted.load.return as string).toMatch(/^\["f0","f1","f2",/)
    expect(fitted.load.return as string).toMatch(/\[brine: truncated by the minion: \d+ bytes, the first \d+ kept, to fit max_frame_bytes \(262144\)\]$/)
    expect(encodedBytes(fitted.load)).toBeLessThanOrEqual(256 * 1024 - RETURN_FRAME_RESERVE_BYTES)
  })
})

describe('the spool on a full disk', () => {
  // A real full disk: a 256 KiB tmpfs. Mounting needs CAP_SYS_ADMIN, which this project's machines and CI have (root).
  let mount = ''
  beforeAll(async () => {
    mount = await mkdtemp(join(tmpdir(), 'brine-full-'))
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k,mode=0700', 'tmpfs', mount])
  })
  afterAll(async () => {
    execFileSync('umount', [mount])
    await rm(mount, { recursive: true, force: true })
  })

  it('holds a return whose write fails with ENOSPC in memory (no temporary file left, the copy it had still on disk) and writes it once there is room', async () => {
    const dir = join(mount, 'spool')
    await mkdir(dir)
    const spool = new ReturnSpool(dir, silentLogger)
    const first = await spool.write(load('small'))
    // Something else fills the disk: the next, larger copy of the same return does not fit.
    const filler = join(mount, 'filler')
    await writeFile(filler, Buffer.alloc(200 * 1024))
    const bigger = 'x'.repeat(100 * 1024)
    expect(await spool.write(load(bigger))).toBe(first)
    expect(await readdir(dir)).toEqual(['20240101000000000001.msgpack'])
    expect((decode(await readFile(first)) as ReturnLoad).return).toBe('small')
    // The spool delivers the newer copy, from memory, in its place.
    expect(await spool.list()).toEqual([first])
    expect((await spool.read(first)).return).toBe(bigger)
    expect(spool.held).toBe(1)
    // The space is free again: a retry writes the held copy.
    await rm(filler)
    for (const end = Date.now() + 20_000; spool.held > 0; await new Promise((resolve) => setTimeout(resolve, 20))) {
      if (Date.now() > end) throw new Error('timed out waiting for the held return to be written')
    }
    expect((decode(await readFile(first)) as ReturnLoad).return).toBe(bigger)
    expect(await readdir(dir)).toEqual(['20240101000000000001.msgpack'])
  })
})
