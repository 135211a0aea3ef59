import { afterAll, afterEach } from 'vitest'
import { MasterEvent } from '@brine/client'
import { tags } from '@brine/protocol'
import { killAllProcesses } from '@brine/testkit'
import { Fleet, type FleetOptions, type TransportName } from '@brine/harness'

export const TRANSPORTS: TransportName[] = ['zeromq', 'tcp', 'nats']

/** How e2e fleets read the master's bus: through the client's MasterEvent. */
export const bus: FleetOptions['bus'] = { open: (busOptions) => new MasterEvent(busOptions), tags }

/**
 * Registers teardown for the calling test file — every fleet a test started is stopped after it, and every
 * process the test kit started is killed by pid after the file — and returns the function that starts one,
 * reading the master's bus through the client's MasterEvent.
 */
export function useFleets(beforeStop: () => Promise<void> = async () => {}): (options: Omit<FleetOptions, 'bus'>) => Promise<Fleet> {
  const fleets: Fleet[] = []
  afterEach(async () => {
    await beforeStop()
    for (const fleet of fleets.splice(0)) await fleet.stop()
  })
  afterAll(() => killAllProcesses())
  return async (options) => {
    const fleet = await Fleet.start({ ...options, bus })
    fleets.push(fleet)
    return fleet
  }
}

/**
 * For a describe whose tests share fleets they do not disturb: call it inside the describe; the fleets started
 * through it are stopped after the describe's last test instead of after each test.
 */
export function useSharedFleets(beforeStop: () => Promise<void> = async () => {}): (options: Omit<FleetOptions, 'bus'>) => Promise<Fleet> {
  const fleets: Fleet[] = []
  afterAll(async () => {
    await beforeStop()
    for (const fleet of fleets.splice(0)) await fleet.stop()
  })
  return async (options) => {
    const fleet = await Fleet.start({ ...options, bus })
    fleets.push(fleet)
    return fleet
  }
}
