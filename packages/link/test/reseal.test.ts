import { describe, expect, it } from 'vitest'
import { generateKeys, PeerBox, ReplayGuard, type SealedMessage } from '@brine/crypt'
import { serializeError, type WireValue } from '@brine/core'
import type { RequestClient } from '@brine/transport'
import type { MasterSession, MinionAuth } from '../src/auth.js'
import { MasterTime } from '../src/master-time.js'
import { sendSealed, sendSealedFresh } from '../src/returner.js'

/**
 * The master's side of a sealed request: opens it, records its timestamp in `stamps`, runs it through the guard
 * `guard()` gives at the time, and answers sealed at `now()` — `{ok: true}`, or the guard's refusal as an error.
 */
function fakeMaster(masterBox: PeerBox, guard: () => ReplayGuard, stamps: number[], now: () => number = Date.now): RequestClient {
  return {
    address: 'tcp://127.0.0.1:4506',
    send: async (request: WireValue): Promise<WireValue> => {
      const sealed = request as unknown as SealedMessage
      const { timestamp } = masterBox.openDetailed(sealed)
      stamps.push(timestamp)
      try {
        await guard().run('web1', sealed.nonce, timestamp, async () => {})
        return masterBox.seal({ ok: true }, now()) as unknown as WireValue
      } catch (error) {
        return masterBox.seal({ ok: false, error: serializeError(error) as unknown as WireValue }, now()) as unknown as WireValue
      }
    },
  } as unknown as RequestClient
}

/**
 * A master restarted a moment ago refuses what was sealed before its start. A minion whose clock anchor lags (its
 * last auth reply was slow to arrive) seals its first requests before that start by its own reckoning: the
 * master's sealed refusal says when it started, and the minion re-seals from there without an `_auth`.
 */
describe('sendSealedFresh after a master restart', () => {
  it('re-seals a request refused as sealed before the master started from the start the refusal names, without an _auth', async () => {
    const minion = generateKeys()
    const master = generateKeys()
    const startedAt = Date.now()
    // The master's side: its replay guard refuses what was sealed at or before its start.
    const guard = new ReplayGuard({ windowMs: 300_000, perMinion: 100, total: 1000, startedAt })
    const masterBox = new PeerBox({ id: 'web1', role: 'master', secretKey: master.box.secretKey, peerPublicKey: minion.box.publicKey })
    const stamps: number[] = []
    const client = fakeMaster(masterBox, () => guard, stamps)
    // The minion's side: an anchor 5 s behind the master's clock.
    const time = new MasterTime(Date.now() - 5000)
    const session = {
      session: { key: new Uint8Array(32), gen: 1 },
      box: new PeerBox({ id: 'web1', role: 'minion', secretKey: minion.box.secretKey, peerPublicKey: master.box.publicKey }),
      time,
    } as unknown as MasterSession
    let refreshes = 0
    const auth = {
      current: session,
      ready: async () => session,
      refresh: async () => {
        refreshes++
        return session
      },
    } as unknown as MinionAuth
    const load = { cmd: '_minion_event', id: 'web1', events: [] }

    expect(await sendSealedFresh(client, auth, load, { timeout: 1000, tries: 1 })).toMatchObject({ ok: true })
    expect(stamps).toHaveLength(2)
    expect(stamps[0]).toBeLessThanOrEqual(startedAt)
    expect(stamps[1]).toBeGreaterThan(startedAt)
    expect(refreshes).toBe(0)
    // The anchor moved to the master's start: the next request goes through at once.
    expect(time.now()).toBeGreaterThan(startedAt)
    expect(await sendSealedFresh(client, auth, load, { timeout: 1000, tries: 1 })).toMatchObject({ ok: true })
    expect(stamps).toHaveLength(3)
    expect(guard.stats()).toMatchObject({ applied: 2, stale: 1 })
  })

  it('catches a lagging anchor up from any sealed answer, so a request after a restart goes through at once', async () => {
    const minion = generateKeys()
    const master = generateKeys()
    const masterBox = new PeerBox({ id: 'web1', role: 'master', secretKey: master.box.secretKey, peerPublicKey: minion.box.publicKey })
    // The master's clock, and the guard of a master up for a minute (a restart replaces it).
    let masterNow = 5_000_000
    let guard = new ReplayGuard({ windowMs: 300_000, perMinion: 100, total: 1000, now: () => masterNow, startedAt: masterNow - 60_000 })
    const stamps: number[] = []
    const client = fakeMaster(
      masterBox,
      () => guard,
      stamps,
      () => masterNow,
    )
    // The minion's anchor is 3 s behind the master's clock: its auth reply took that long to arrive.
    let wall = 1_000
    const time = new MasterTime(masterNow - 3000, { wall: () => wall, monotonic: () => wall })
    const session = {
      session: { key: new Uint8Array(32), gen: 1 },
      box: new PeerBox({ id: 'web1', role: 'minion', secretKey: minion.box.secretKey, peerPublicKey: master.box.publicKey }),
      time,
    } as unknown as MasterSession
    const auth = { current: session, ready: async () => session, refresh: async () => session } as unknown as MinionAuth
    const load = { cmd: '_return', id: 'web1' }

    expect(await sendSealed(client, session, load, { timeout: 1000, tries: 1 })).toMatchObject({ ok: true })
    expect(stamps[0]).toBe(masterNow - 3000)
    // Caught up with the time the master sealed its answer at, and never beyond it.
    expect(time.now()).toBe(masterNow)

    // The master restarts 1 s later; the minion checks in 1.5 s after that.
    masterNow += 1000
    guard = new ReplayGuard({ windowMs: 300_000, perMinion: 100, total: 1000, now: () => masterNow, startedAt: masterNow })
    masterNow += 1500
    wall += 2500
    const checkIn = { cmd: '_minion_event', id: 'web1', events: [] }
    expect(await sendSealedFresh(client, auth, checkIn, { timeout: 1000, tries: 1 })).toMatchObject({ ok: true })
    // One request, applied: nothing sealed before the restarted master's start, no refusal, no second round trip.
    expect(stamps).toHaveLength(2)
    expect(guard.stats()).toMatchObject({ applied: 1, stale: 0 })
  })

  it('moves the anchor only forward', () => {
    const time = new MasterTime(1_000_000)
    const before = time.now()
    time.atLeast(before - 60_000)
    expect(time.now()).toBeLessThan(before + 1000)
    time.atLeast(before + 60_000)
    expect(time.now()).toBeGreaterThanOrEqual(before + 60_000)
  })
})
