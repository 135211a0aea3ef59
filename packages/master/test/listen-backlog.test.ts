/**
 * `zmq_backlog` (Salt's key) is the listen backlog of every socket the master binds, ZeroMQ's and TCP's alike: a
 * fleet reconnecting at once after a master restart waits in the kernel's queue until the master accepts it, and
 * past the backlog the kernel drops handshakes that then retry a second or more later. What the kernel holds for a
 * listening socket is what `ss` shows as its Send-Q. NATS is left out: a NATS master binds no socket (the broker's
 * backlog is the nats-server's).
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { PkiStore, generateKeys, publicKeysOf } from '@brine/crypt'
import { type Logger } from '@brine/core'
import { listenBacklogFor, warnOfListenCap } from '../src/listen-backlog.js'
import { runCleanups, startMaster, tempDir } from './helpers.js'

afterEach(runCleanups)

/** The backlog the kernel keeps for the socket listening on 127.0.0.1:`port` (the Send-Q `ss` shows for it). */
function listenBacklogOf(port: number): number {
  const line = execFileSync('ss', ['-Hltn', `sport = :${port}`], { encoding: 'utf8' }).trim()
  const fields = line.split(/\s+/)
  if (fields[0] !== 'LISTEN') throw new Error(`nothing listens on port ${port}: ss said ${JSON.stringify(line)}`)
  return Number(fields[2])
}

/** The kernel takes at most net.core.somaxconn of what a listen() asks for. */
const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'))

describe.each(['zeromq', 'tcp'])('the listen backlog of a master over %s', (transport) => {
  it("is Salt's zmq_backlog default, 1000, on the publish and the request port", async () => {
    const { master } = await startMaster(await tempDir(), { transport })
    const { publish_port, ret_port } = master.opts
    expect([listenBacklogOf(publish_port), listenBacklogOf(ret_port)]).toEqual([Math.min(1000, somaxconn), Math.min(1000, somaxconn)])
  })

  it('is zmq_backlog as configured', async () => {
    const { master } = await startMaster(await tempDir(), { transport, zmq_backlog: 777 })
    const { publish_port, ret_port } = master.opts
    expect([listenBacklogOf(publish_port), listenBacklogOf(ret_port)]).toEqual([Math.min(777, somaxconn), Math.min(777, somaxconn)])
  })

  it('is the accepted fleet when that is larger than zmq_backlog: every minion reconnects to both ports at once after a restart', async () => {
    const dir = await tempDir()
    const store = await PkiStore.open(join(dir, 'pki'))
    for (let index = 0; index < 60; index++) await store.submit(`fleet-${index}`, publicKeysOf(generateKeys()), { autoAccept: true })
    const { master } = await startMaster(dir, { transport, zmq_backlog: 40 })
    const { publish_port, ret_port } = master.opts
    expect([listenBacklogOf(publish_port), listenBacklogOf(ret_port)]).toEqual([Math.min(60, somaxconn), Math.min(60, somaxconn)])
  })
})

describe('the listen backlog for a fleet', () => {
  it('is zmq_backlog or the accepted minions, whichever is larger', () => {
    expect(listenBacklogFor(1000, 5000)).toBe(5000)
    expect(listenBacklogFor(1000, 10)).toBe(1000)
  })

  it("warns once at start when the kernel's net.core.somaxconn queues fewer, naming what to raise", () => {
    const warnings: string[] = []
    const logger = { warning: (line: string) => warnings.push(line) } as unknown as Logger
    warnOfListenCap(4096, 4096, logger, 4096)
    warnOfListenCap(1000, 10, logger, undefined)
    expect(warnings).toEqual([])
    warnOfListenCap(5000, 5000, logger, 4096)
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain('net.core.somaxconn 4096')
    expect(warnings[0]).toContain('sysctl -w net.core.somaxconn=5000')
  })
})
