// vitest sequencer: the files expected to take longest start first, across every project, so that the run does not
// end with one worker alone on a long file that started late. What a file takes comes from vitest's own cache of the
// last run on this clone, else from scripts/test-durations.json (committed, so that a clean clone sorts the same way);
// files in neither (new ones) start first, largest first, as vitest's own sequencer does with files it does not know.
import { readFileSync } from 'node:fs'
import { stat } from 'node:fs/promises'
import { relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { BaseSequencer, type TestSpecification } from 'vitest/node'

const root = fileURLToPath(new URL('..', import.meta.url))

/** Seconds each known file took, by path from the repository's root: written by scripts/test-durations.mjs. */
const committed = JSON.parse(readFileSync(new URL('./test-durations.json', import.meta.url), 'utf8')) as Record<string, number>

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const expected = new Map(files.map((spec) => [spec, this.expectedMs(spec)]))
    const sizes = new Map(
      await Promise.all(
        files.map(
          async (spec) =>
            [
              spec,
              await stat(spec.moduleId).then(
                (stats) => stats.size,
                () => 0,
              ),
            ] as const,
        ),
      ),
    )
    return [...files].sort((a, b) => {
      const order = a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder
      if (order !== 0) return order
      const [msA, msB] = [expected.get(a), expected.get(b)]
      if (msA === undefined || msB === undefined) {
        if (msA !== msB) return msA === undefined ? -1 : 1
        return sizes.get(b)! - sizes.get(a)!
      }
      return msB - msA
    })
  }

  private expectedMs(spec: TestSpecification): number | undefined {
    const cached = this.ctx.cache.getTestSpecificationResult(spec)?.duration
    if (cached !== undefined) return cached
    const seconds = committed[relative(root, spec.moduleId)]
    return seconds === undefined ? undefined : seconds * 1000
  }
}
