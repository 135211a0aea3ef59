import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { collectVersions, findPackageDir, formatVersionsReport } from '../src/versions.js'

const lockVersion = (name: string): string => {
  const lock = JSON.parse(readFileSync(new URL('../../../package-lock.json', import.meta.url), 'utf8')) as { packages: Record<string, { version?: string }> }
  return lock.packages[`node_modules/${name}`]!.version!
}

describe('versions report', () => {
  it("reports Brine, Node, the installed libraries and the system, in Salt's layout (no libzmq: nothing loads it)", () => {
    const report = collectVersions({ version: '9.8.7', dependencies: [{ name: 'no-such-package-here' }] })
    const text = formatVersionsReport(report)
    const node = process.versions.node.replaceAll('.', '\\.')
    expect(text).toMatch(new RegExp(`^Brine Version:\\n +Brine: 9\\.8\\.7\\n \\nNode Version:\\n +Node: ${node}\\n \\nDependency Versions:\\n`))
    const dependencies = report.find(([section]) => section === 'Dependency Versions')![1]
    expect(dependencies).toMatchObject({
      msgpackr: lockVersion('msgpackr'),
      yaml: lockVersion('yaml'),
      tweetnacl: lockVersion('tweetnacl'),
      pg: lockVersion('pg'),
      'no-such-package-here': null,
    })
    expect(dependencies).not.toHaveProperty('libzmq')
    expect(dependencies).not.toHaveProperty('zeromq')
    expect(text).toContain('no-such-package-here: Not Installed\n')
    expect(text).toMatch(/\n +system: Linux\n/)
    // Names are right-aligned to one column across every section, as Salt prints them.
    const colons = text
      .split('\n')
      .filter((line) => line.includes(': '))
      .map((line) => line.indexOf(': '))
    expect(new Set(colons).size).toBe(1)
  })

  it('finds a package the way Node does, walking up through node_modules', () => {
    const here = new URL('.', import.meta.url).pathname
    expect(findPackageDir('yaml', here)).toMatch(/node_modules\/yaml$/)
    expect(findPackageDir('@brine/transport', here)).toMatch(/packages\/transport$/)
    expect(findPackageDir('no-such-package-here', here)).toBeUndefined()
  })
})
