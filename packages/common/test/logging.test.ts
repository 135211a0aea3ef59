import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { loggerFromConfig } from '../src/logging.js'

let dir: string
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'brine-log-'))
})
afterEach(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('loggerFromConfig', () => {
  it('logs at log_level to stderr only when there is no log_file', () => {
    const lines: string[] = []
    const logger = loggerFromConfig({ log_level: 'info' }, 'master', { write: (line) => lines.push(line) })
    logger.info('started')
    logger.debug('hidden')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/\[INFO {4}\] \[master\] started\n$/)
  })

  it('appends to log_file at log_level_logfile as well as stderr at log_level', async () => {
    const file = join(dir, 'logs', 'minion')
    const lines: string[] = []
    const logger = loggerFromConfig({ log_level: 'error', log_file: file, log_level_logfile: 'debug' }, 'minion', {
      write: (line) => lines.push(line),
    })
    logger.error('bad')
    logger.debug('detail')
    logger.trace('too much')
    expect(lines.map((line) => line.trim().split('] ').pop())).toEqual(['bad'])
    const text = await readFile(file, 'utf8')
    expect(text.trim().split('\n').map((line) => line.split('] ').pop())).toEqual(['bad', 'detail'])
  })
})
