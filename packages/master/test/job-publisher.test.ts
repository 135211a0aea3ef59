import { describe, expect, it } from 'vitest'
import type { SaveJobOptions } from '@brine/common'
import type { PkiStore } from '@brine/crypt'
import type { PublishServer } from '@brine/transport'
import { generateJid } from '@brine/protocol'
import { IssuedJobs, JobPublisher, MemoryJobStore, type EventBus, type GrainsCache, type NamedJob } from '../src/index.js'

/** A cache whose job record is written only when the test says so: a disk as slow as the test needs. */
class HeldWrites extends MemoryJobStore {
  readonly calls: string[] = []
  #release = (): void => {}
  readonly #released = new Promise<void>((resolve) => (this.#release = resolve))
  #called = (): void => {}
  readonly called = new Promise<void>((resolve) => (this.#called = resolve))

  override async saveJob(jid: string, load: Record<string, unknown>, minions: readonly string[], options?: SaveJobOptions): Promise<void> {
    this.#called()
    await this.#released
    await super.saveJob(jid, load, minions)
    this.calls.push('written')
    options?.onWritten?.()
  }

  release(): void {
    this.#release()
  }
}

/** Everything queued now (promises and immediates alike) has run: the fakes below never wait on I/O. */
const drained = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

function publisherWith(jobs: HeldWrites, published: string[]): JobPublisher {
  const publisher = { publish: async () => void published.push('published') } as unknown as PublishServer
  return new JobPublisher({
    store: {} as PkiStore,
    grains: {} as GrainsCache,
    jobs,
    bus: { fire: () => {} } as unknown as EventBus,
    publisher,
    seal: async (_jid, load) => load as never,
    nodegroups: {},
    issued: new IssuedJobs({ jobs, now: Date.now, clockSkewMs: 60_000 }),
    publishTtlMs: 60_000,
  })
}

describe('JobPublisher', () => {
  it('publishes a job only once its record is written to the job cache: a master killed right after still knows the job', async () => {
    const jobs = new HeldWrites()
    const order = jobs.calls
    const publisher = publisherWith(jobs, order)
    const job: NamedJob = { jid: generateJid(), tgt: 'web1', tgt_type: 'glob', fun: 'cmd.run', arg: ['sleep 3'], kwarg: {}, ret: '', user: 'root' }
    let replied = false
    const publishing = publisher.publish(job, ['web1']).then((reply) => {
      replied = true
      return reply
    })
    await jobs.called
    await drained()
    expect(order).toEqual([])
    expect(replied).toBe(false)
    jobs.release()
    expect(await publishing).toEqual({ jid: job.jid, minions: ['web1'] })
    expect(order).toEqual(['written', 'published'])
    expect((await jobs.getJob(job.jid))?.load).toMatchObject({ jid: job.jid, fun: 'cmd.run', tgt: 'web1' })
  })

  it('publishes all the same when the job record cannot be saved (logged, as Salt does)', async () => {
    class Failing extends HeldWrites {
      override async saveJob(): Promise<void> {
        throw new Error('EIO: the disk went away')
      }
    }
    const order: string[] = []
    const job: NamedJob = { jid: generateJid(), tgt: 'web1', tgt_type: 'glob', fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'root' }
    expect(await publisherWith(new Failing(), order).publish(job, ['web1'])).toEqual({ jid: job.jid, minions: ['web1'] })
    expect(order).toEqual(['published'])
  })
})
