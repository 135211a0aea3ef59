import { afterAll, afterEach } from 'vitest'
import { MasterEvent, WheelClient } from '@brine/client'
import { tags } from '@brine/protocol'
import { killAllProcesses } from '@brine/testkit'
import { Fleet, type FleetOptions, type TransportName } from '@brine/harness'

export const TRANSPORTS: TransportName[] = ['zeromq', 'tcp', 'nats']

/** How e2e fleets read the master's bus: through the client's MasterEvent. */
export const bus: FleetOptions['bus'] = { open: (busOptions) => new MasterEvent(busOptions), tags }

/**
 * The harness's own key operations (a syndic node's `--accept-syndic` on its upper master) as wheel calls from the test
 * process: the same wheel function `brine-key` calls, without a process per syndic (syndic-refusals runs the command).
 */
export const wheel: FleetOptions['wheel'] = (options) => new WheelClient(options)

/**
 * Registers teardown for the calling test file — every fleet a test started is stopped after it, and every
 * process the test kit started is killed by pid after the file — and returns the function that starts one,
 * reading the master's bus through the client's MasterEvent and making its wheel calls through its WheelClient.
 */
export function useFleets(beforeStop: () => Promise<void> = async () => {}): (options: Omit<FleetOptions, 'bus'>) => Promise<Fleet> {
  const fleets: Fleet[] = []
  afterEach(async () => {
    await beforeStop()
    for (const fleet of fleets.splice(0)) await fleet.stop()
  })
  afterAll(() => killAllProcesses())
  return async (options) => {
    const fleet = await Fleet.start({ ...options, bus, wheel })
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
    const fleet = await Fleet.start({ ...options, bus, wheel })
    fleets.push(fleet)
    return fleet
  }
}
