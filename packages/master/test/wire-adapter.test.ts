import { buildAuthRequest, generateKeys, PeerBox } from '@brine/crypt'
import { clearRequest } from '@brine/protocol'
import type { WireValue } from '@brine/core'
import { describe, expect, it } from 'vitest'
import { isOperatorRequest } from '../src/index.js'

describe('isOperatorRequest: what the request servers serve before waiting minion requests', () => {
  it("picks the operator's clear commands and nothing a minion sends", () => {
    const minion = generateKeys()
    const master = generateKeys()
    const box = new PeerBox({ id: 'web1', role: 'minion', secretKey: minion.box.secretKey, peerPublicKey: master.box.publicKey })
    const operator = ['publish', 'runner', 'wheel', 'fire_event', 'mk_token', 'get_token', 'rm_token'].map((cmd) =>
      clearRequest({ cmd, key: 'root key', fun: 'test.ping' }),
    )
    for (const request of operator) expect(isOperatorRequest(request as unknown as WireValue)).toBe(true)
    const minions: unknown[] = [
      // A minion's authentication, its sealed return: the flood an operator's request must not wait behind.
      clearRequest(buildAuthRequest('web1', minion)),
      box.seal({ cmd: '_return', id: 'web1', jid: '20261127035800123456', return: true }),
      // Not a clear command at all: the adapter refuses these, and they gain no place in the lane either.
      { enc: 'clear', load: 'publish' },
      { enc: 'clear', load: { cmd: 7 } },
      { enc: 'clear' },
      ['clear', { cmd: 'publish' }],
      'publish',
      null,
    ]
    for (const request of minions) expect(isOperatorRequest(request as WireValue)).toBe(false)
  })
})
