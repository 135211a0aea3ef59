import { mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { loggerFromConfig, openDaemonLogging } from '../src/logging.js'

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
    expect(
      text
        .trim()
        .split('\n')
        .map((line) => line.split('] ').pop()),
    ).toEqual(['bad', 'detail'])
  })
})

describe('openDaemonLogging', () => {
  const messages = (text: string): string[] =>
    text
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split('] ').pop()!)

  it('logs to the file at log_level when log_level_logfile is null (Salt), and -l sets both', async () => {
    const file = join(dir, 'master')
    const lines: string[] = []
    const logging = openDaemonLogging({ log_level: 'warning', log_file: file, log_level_logfile: null }, 'master', {
      write: (line) => lines.push(line),
      consoleLevel: 'info',
    })
    logging.logger.info('started')
    logging.logger.debug('detail')
    logging.close()
    expect(messages(await readFile(file, 'utf8'))).toEqual(['started'])
    expect(lines).toHaveLength(1)
    expect((await stat(file)).mode & 0o777).toBe(0o640)
  })

  it('keeps writing to a moved file until reopen(), then starts a new one at log_file (logrotate)', async () => {
    const file = join(dir, 'log', 'minion')
    const logging = openDaemonLogging({ log_level: 'quiet', log_file: file, log_level_logfile: 'info' }, 'minion', { write: () => {} })
    logging.logger.info('one')
    await rename(file, `${file}.1`)
    logging.logger.info('two')
    logging.reopen()
    logging.logger.info('three')
    logging.close()
    expect(messages(await readFile(`${file}.1`, 'utf8'))).toEqual(['one', 'two'])
    expect(messages(await readFile(file, 'utf8'))).toEqual([`reopened log_file ${file}`, 'three'])
  })

  it('says on stderr when the file cannot be opened or reopened, and goes on logging', async () => {
    // A regular file where a directory must be: fails for root too, unlike a chmod.
    await writeFile(join(dir, 'not-a-directory'), '')
    const lines: string[] = []
    const logging = openDaemonLogging({ log_level: 'info', log_file: join(dir, 'not-a-directory', 'master') }, 'master', { write: (line) => lines.push(line) })
    logging.logger.info('still here')
    expect(logging.file).toBeUndefined()
    expect(lines[0]).toMatch(/\[ERROR {3}\] \[master\] cannot open log_file .*not-a-directory\/master: .*; logging to stderr only\n$/)
    expect(lines[1]).toMatch(/still here\n$/)

    const file = join(dir, 'rotating', 'master')
    const errors: string[] = []
    const rotating = openDaemonLogging({ log_level: 'error', log_file: file, log_level_logfile: 'info' }, 'master', { write: (line) => errors.push(line) })
    await rename(join(dir, 'rotating'), join(dir, 'rotated'))
    await writeFile(join(dir, 'rotating'), '')
    rotating.reopen()
    rotating.logger.info('kept')
    rotating.close()
    expect(errors.join('')).toMatch(/cannot reopen log_file .*rotating\/master: .*; still writing to the file it had open/)
    expect(messages(await readFile(join(dir, 'rotated', 'master'), 'utf8')).at(-1)).toBe('kept')
  })
})
