/**
 * Data loss at the edges and awkward ids, with real daemons through the built CLIs, on both transports:
 * a 70 MB command output reaches `brine` cut below max_frame_bytes with a marker and its retcode (it used
 * to be "could not be spooled; it is lost" and "Minion did not return"); a key named `x[1]` is deleted by
 * its own name without touching `x1`; a mixed-script id is flagged by `brine-key -L`. The master receives that
 * return once: it used to be sent again each return_retry_timer while a loaded master was still taking it in.
 */
import { describe, expect, it } from 'vitest'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'

const startFleet = useFleets()
const MAX_FRAME_BYTES = 67108864
const OUTPUT_BYTES = 70_000_000
const ERROR_BYTES = 10_000_000

describe.each(TRANSPORTS)('limits over %s', (transport) => {
  // Bounded at 5 minutes, a failure limit and not a timing: 80 MB through a loaded machine's pipes can take past the default minute.
  it('a 70 MB + 10 MB cmd.run_all output arrives truncated with the marker and its retcode; brine-key matches names literally and flags look-alikes', async () => {
    const fleet = await startFleet({
      minions: [
        { id: 'x1', transport },
        { id: 'x[1]', transport },
        { id: 'w\u0435b1', transport }, // a Cyrillic е
      ],
    })
    // Nothing below waits on the fleet's own bus reader: closed, it is not sent the job's 64 MB return event (the
    // master would write it to that reader too, and this process decode it, for nothing).
    await fleet.closeBus()

    // 70 MB on stdout (cmd.* caps a stream at 64 MiB) and 10 MB on stderr: together over max_frame_bytes.
    const command = `head -c ${OUTPUT_BYTES} /dev/zero | tr '\\0' y; head -c ${ERROR_BYTES} /dev/zero | tr '\\0' e >&2; exit 3`
    const big = await fleet.run('brine', ['-L', 'x1', 'cmd.run_all', command, '--out', 'json', '--static', '-t', '120'], { ms: 180_000 })
    expect(big.stderr).not.toContain('did not return')
    const returned = (JSON.parse(big.stdout) as Record<string, { retcode: number; stdout: string; stderr: string }>).x1!
    expect(returned.retcode).toBe(3)
    // The shorter stream arrives whole; the longer one is cut below the frame limit, each cut marked.
    expect(returned.stderr).toBe('e'.repeat(ERROR_BYTES))
    const marker =
      /\n\[brine: output truncated at 67108864 bytes\]\n\[brine: truncated by the minion: 67108864 bytes, the first (\d+) kept, to fit max_frame_bytes \(67108864\)\]$/.exec(
        returned.stdout,
      )
    expect(marker, returned.stdout.slice(-300)).not.toBeNull()
    const kept = Number(marker![1])
    expect(kept + ERROR_BYTES).toBeLessThan(MAX_FRAME_BYTES)
    expect(kept + ERROR_BYTES).toBeGreaterThan(MAX_FRAME_BYTES - 64 * 1024)
    expect(returned.stdout.slice(0, kept)).toBe('y'.repeat(kept))
    expect(big.code).toBe(1) // a non-zero retcode, as Salt's exit code says
    expect(fleet.minions.get('x1')!.stderr).not.toContain('it is lost')
    // The master received the return once: no try of it came again (a try waits for the return's size), none was spooled.
    expect(`${fleet.master.stderr}\n${fleet.minions.get('x1')!.stderr}`).not.toMatch(/\(\d{7,} bytes\) came again|not acknowledged/)

    const deleted = await fleet.run('brine-key', ['-d', 'x[1]', '-y'])
    expect(deleted.stdout).toBe('The following keys are going to be deleted:\nAccepted Keys:\nx[1]\nKey for minion x[1] deleted.\n')
    const listed = await fleet.run('brine-key', ['-L'])
    expect(listed.stdout).toBe('Accepted Keys:\nw\u0435b1\nx1\nDenied Keys:\nUnaccepted Keys:\nRejected Keys:\n')
    expect(listed.stderr).toBe('brine-key: warning: minion id "w\u0435b1" (w\\u{435}b1) mixes scripts (Latin, Cyrillic); it may imitate another id\n')
  }, 300_000)
})
