// vitest globalSetup: says which Node ran the tests, so a run's log shows the runtime it proves.
export default function printRuntime(): void {
  process.stderr.write(`tests run on Node ${process.version} (${process.execPath})\n`)
}
