/**
 * @packageDocumentation
 * `@brine/minion` is the Brine minion: it authenticates to its masters, subscribes to their
 * publishes, matches targets, runs Salt's execution modules (test, cmd, grains, saltutil, sys)
 * and returns their results in Salt's shapes, spooling returns while a master is away.
 */
export * from './modules/index.js'
export * from './executor.js'
