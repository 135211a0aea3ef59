import { afterAll, afterEach } from 'vitest'
import { Fleet, killAllFleetProcesses, type TransportName } from '@brine/bench'

export const TRANSPORTS: TransportName[] = ['zeromq', 'tcp']

/**
 * Registers teardown for the calling test file — every fleet a test started is stopped after it, and every
 * daemon any fleet started is killed by pid after the file — and returns the function that starts one.
 */
export function useFleets(beforeStop: () => Promise<void> = async () => {}): (options: Parameters<typeof Fleet.start>[0]) => Promise<Fleet> {
  const fleets: Fleet[] = []
  afterEach(async () => {
    await beforeStop()
    for (const fleet of fleets.splice(0)) await fleet.stop()
  })
  afterAll(() => killAllFleetProcesses())
  return async (options) => {
    const fleet = await Fleet.start(options)
    fleets.push(fleet)
    return fleet
  }
}
