import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import bcrypt from 'bcryptjs'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { freeLoopbackPort, killAllProcesses } from '@brine/testkit'
import { Fleet } from '@brine/harness'
import { FleetClients } from './helpers/clients.js'
import { bus, TRANSPORTS } from './helpers/fleets.js'
import { htpasswdEauth, selfSignedCertificate } from './helpers/http.js'

/** Debian's chromium, installed by scripts/ensure-chromium.sh; never a downloaded browser. */
const CHROMIUM = process.env['BRINE_CHROMIUM'] ?? '/usr/bin/chromium'
const WAIT_MS = 30_000
const PASSWORDS = { admin: 'admin-pw', alice: 'wonder', shortlived: 'tick' }
const SCREENSHOTS = new URL('../docs/console/', import.meta.url).pathname

afterAll(() => killAllProcesses())

async function secrets(dir: string): Promise<void> {
  const hash = (password: string): string => bcrypt.hashSync(password, 8).replace(/^\$2b\$/, '$2y$')
  await writeFile(
    join(dir, 'htpasswd'),
    Object.entries(PASSWORDS)
      .map(([user, password]) => `${user}:${hash(password)}\n`)
      .join(''),
  )
  await selfSignedCertificate(dir)
}

/** Fails loudly, before any daemon starts, when the browser is missing: naming the script that installs it. */
function requireChromium(): void {
  if (!existsSync(CHROMIUM)) throw new Error(`Chromium is not installed at ${CHROMIUM}: run \`npm run chromium\` (bash scripts/ensure-chromium.sh) first`)
}

/**
 * One headless Chromium for the file, nothing in the background: the browser is the means here, its start and a
 * profile on disk per transport were not what the tests check; each transport gets a context of its own (below).
 */
let launched: Promise<Browser> | undefined
afterAll(async () => {
  await (await launched?.catch(() => undefined))?.close()
})

/** A fresh context (its own cookies and storage, as a new profile has) trusting the API's self-signed certificate. */
async function browserContext(): Promise<BrowserContext> {
  launched ??= chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    timeout: WAIT_MS,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
  return (await launched).newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 760 } })
}

describe.each(TRANSPORTS)('the web console in Chromium over %s', (transport) => {
  let fleet: Fleet
  /** The jobs the tests run beside the page, through a LocalClient as `brine` publishes them (the page is what is tested). */
  const clients = new FleetClients()
  let dir: string
  let context: BrowserContext
  let page: Page
  let base: string
  /** Script errors and CSP violations the page reported. */
  const problems: string[] = []
  /** The first transport's run writes the screenshots the docs show. */
  const shoot = async (name: string): Promise<void> => {
    if (transport === TRANSPORTS[0]) await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`) })
  }
  const logIn = async (user: keyof typeof PASSWORDS, tokenExpire?: number): Promise<void> => {
    await page.locator('input[name=username]').fill(user)
    await page.locator('input[name=password]').fill(PASSWORDS[user])
    await page.locator('input[name=eauth]').fill('file')
    if (tokenExpire !== undefined) {
      await page.getByText('Session length').click()
      await page.locator('input[name=token_expire]').fill(String(tokenExpire))
    }
    await page.getByRole('button', { name: 'Log in' }).click()
  }
  const logOut = async (): Promise<void> => {
    await page.getByRole('button', { name: 'Log out' }).click()
    await page.getByRole('button', { name: 'Log in' }).waitFor()
  }
  const runJob = async (tgt: string, fun: string, args = ''): Promise<void> => {
    await page.locator('header a[data-page=run]').click()
    await page.locator('input[name=tgt]').fill(tgt)
    await page.locator('input[name=fun]').fill(fun)
    await page.locator('input[name=args]').fill(args)
    await page.getByRole('button', { name: 'Run', exact: true }).click()
  }

  beforeAll(async () => {
    requireChromium()
    dir = await mkdtemp(join(tmpdir(), 'brine-console-'))
    await secrets(dir)
    await mkdir(SCREENSHOTS, { recursive: true })
    const port = await freeLoopbackPort()
    fleet = await Fleet.start({
      bus,
      autoAccept: false,
      waitForMinions: false,
      minions: ['web1', 'web2', 'db1'].map((id) => ({ id, transport, grains: { role: id.replace(/\d+$/, '') } })),
      masterConfig: {
        timeout: 5,
        gather_job_timeout: 2,
        external_auth: htpasswdEauth(dir, {
          admin: ['.*', '@runner', '@wheel'],
          alice: [{ '*': ['test.*'] }, { '@runner': ['jobs\\..*'] }],
          shortlived: ['test.*'],
        }),
        token_expire_user_override: { file: ['shortlived'] },
        netapi_enable_clients: ['local', 'local_async', 'local_batch', 'runner', 'wheel'],
        rest_cherrypy: { port, host: '127.0.0.1', ssl_crt: join(dir, 'crt.pem'), ssl_key: join(dir, 'key.pem') },
      },
    })
    await Promise.all(['web1', 'web2', 'db1'].map((id) => fleet.waitForAuth(id, 'pend')))
    const mark = fleet.startEventCount
    const accepted = await fleet.run('brine-key', ['-A', '-y'])
    expect(accepted.code, accepted.stderr).toBe(0)
    await Promise.all(['web1', 'web2', 'db1'].map((id) => fleet.waitForMinionStart(id, mark)))
    base = (await fleet.startApi()).url
    context = await browserContext()
    page = await context.newPage()
    page.setDefaultTimeout(WAIT_MS)
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`))
    page.on('console', (message) => {
      if (/Content Security Policy|Refused to (load|execute|apply|connect)/i.test(message.text())) problems.push(`console: ${message.text()}`)
    })
  })

  afterAll(async () => {
    await context?.close()
    await clients.close()
    await fleet?.stop()
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })

  it('logs in, lists the 3 minions with their os, and runs test.ping on * with the 3 returns arriving live', async () => {
    const response = await page.goto(`${base}/app/`)
    expect(response?.status()).toBe(200)
    expect(response?.headers()['content-security-policy']).toContain("default-src 'none'")
    await page.getByRole('button', { name: 'Log in' }).waitFor()
    await shoot('login')
    await logIn('admin')

    const os = (await clients.run(fleet, '*', 'grains.item', ['os'])).returns as Record<string, { os: string }>
    const rows = page.locator('table.minions tbody tr')
    await expect.poll(() => rows.count(), { timeout: WAIT_MS }).toBe(3)
    for (const id of ['db1', 'web1', 'web2']) {
      const row = page.locator(`tr[data-minion="${id}"]`)
      await expect.poll(() => row.locator('td.os').innerText(), { timeout: WAIT_MS }).toContain(os[id]!.os)
      await expect.poll(() => row.locator('td.state').innerText(), { timeout: WAIT_MS }).toBe('up')
    }
    await shoot('minions')
    await page.locator('tr[data-minion="web1"] td:first-child a').click()
    await expect.poll(() => page.locator('pre.output').innerText(), { timeout: WAIT_MS }).toMatch(/^role:\n {4}web$/m)
    await shoot('minion')

    await runJob('*', 'test.ping')
    expect(await page.getByTestId('brine-command').innerText()).toBe("brine '*' test.ping")
    // Completion from sys.list_functions and the chosen function's sys.doc, asked of one minion.
    await expect.poll(() => page.locator('datalist#functions option[value="cmd.run"]').count(), { timeout: WAIT_MS }).toBe(1)
    await expect.poll(() => page.locator('pre.doc').innerText(), { timeout: WAIT_MS }).toContain("brine '*' test.ping")
    const returned = page.locator('table.returns tr[data-state=returned]')
    await expect.poll(() => returned.count(), { timeout: WAIT_MS }).toBe(3)
    // Each came over the event stream, not from the job cache the page asks only at its deadline.
    expect(await page.locator('table.returns tr[data-via=event]').count()).toBe(3)
    expect(await page.locator('tr[data-minion="web2"] pre.output').innerText()).toBe('True')
    await shoot('run')
  })

  it('shows the job in Jobs with its returns, and its tags in Events', async () => {
    const jid = (await page.locator('p.started a').innerText()).trim()
    expect(jid).toMatch(/^\d{20}$/)
    await page.locator('header a[data-page=jobs]').click()
    await page.locator(`tr[data-jid="${jid}"]`).waitFor()
    expect(await page.locator(`tr[data-jid="${jid}"]`).innerText()).toContain('test.ping')
    await shoot('jobs')
    await page.locator(`tr[data-jid="${jid}"] a`).click()
    await expect.poll(() => page.locator('table.returns tr[data-state=returned]').count(), { timeout: WAIT_MS }).toBe(3)
    expect(await page.locator('dd[data-field=user]').innerText()).toBe('admin')
    expect(await page.locator('dd[data-field=function]').innerText()).toBe('test.ping')
    await shoot('job')

    // The minions page links each minion's newest job (this one, or the page's own grains lookup after it).
    await page.locator('header a[data-page=minions]').click()
    await expect.poll(async () => (await page.locator('tr[data-minion="web1"] td.last-job').innerText()) >= jid, { timeout: WAIT_MS }).toBe(true)

    await page.locator('header a[data-page=events]').click()
    await page.getByLabel('tag filter').fill(`salt/job/${jid}/*`)
    const tags = page.locator('table.events td.tag')
    await expect
      .poll(async () => (await tags.allInnerTexts()).sort(), { timeout: WAIT_MS })
      .toEqual([`salt/job/${jid}/new`, ...['db1', 'web1', 'web2'].map((id) => `salt/job/${jid}/ret/${id}`)].sort())
    await page.getByLabel('tag filter').fill('salt/job/*')
    await shoot('events')

    // Paused, the list stands still and counts what it did not show; resumed, it moves again.
    const shown = await tags.count()
    await page.getByRole('button', { name: 'Pause' }).click()
    const quiet = await clients.run(fleet, 'web1', 'test.ping')
    expect(quiet.allSucceeded).toBe(true)
    await expect.poll(() => page.locator('section .count').innerText(), { timeout: WAIT_MS }).toMatch(/paused, [1-9]\d* not shown$/)
    expect(await tags.count()).toBe(shown)
    await page.getByRole('button', { name: 'Resume' }).click()
    const loud = await clients.run(fleet, 'web2', 'test.ping')
    expect(loud.allSucceeded).toBe(true)
    await expect.poll(() => tags.count(), { timeout: WAIT_MS }).toBeGreaterThan(shown)
  })

  it("accepts a new minion's pending key from Keys (badge, confirmation), and the minion then answers", async () => {
    const mark = fleet.startEventCount
    await fleet.startMinion({ id: 'new1', transport, grains: { role: 'new' } })
    await fleet.waitForAuth('new1', 'pend', mark)
    await page.getByTestId('pending-badge').waitFor()
    expect(await page.getByTestId('pending-badge').innerText()).toBe('1')
    await page.locator('header a[data-page=keys]').click()
    const pending = page.locator('[data-group=minions_pre] tr[data-key=new1]')
    await pending.waitFor()
    expect(await pending.locator('td.finger').innerText()).toMatch(/^[0-9a-f]{2}(:[0-9a-f]{2})+$/)
    await shoot('keys')
    await pending.locator('button[data-action=accept]').click()
    await page.getByRole('dialog', { name: 'confirm' }).waitFor()
    await page.getByRole('button', { name: 'Yes, accept' }).click()
    await page.locator('[data-group=minions] tr[data-key=new1]').waitFor()
    await page.getByTestId('pending-badge').waitFor({ state: 'detached' })
    await fleet.waitForMinionStart('new1', mark)

    await runJob('new1', 'test.ping')
    await page.locator('table.returns tr[data-minion=new1][data-state=returned]').waitFor()
  })

  it('marks a failing command failed with its retcode, runs in batches, returns only the jid when async, and shows raw JSON', async () => {
    await runJob('web1', 'cmd.run', "'exit 3'")
    const failed = page.locator('table.returns tr[data-minion=web1][data-state=failed]')
    await failed.waitFor()
    expect(await failed.locator('td.state').innerText()).toBe('failed (retcode 3)')

    await page.locator('input[name=batch]').fill('2')
    await runJob('*', 'test.ping')
    expect(await page.getByTestId('brine-command').innerText()).toBe("brine -b 2 '*' test.ping")
    await expect.poll(() => page.locator('table.returns tr[data-state=returned]').count(), { timeout: WAIT_MS }).toBe(4)
    expect(await page.locator('tr[data-minion=db1] pre.output').innerText()).toBe('True')
    await page.getByLabel('raw JSON').check()
    expect(await page.locator('tr[data-minion=db1] pre.output').innerText()).toBe('true')
    await page.getByLabel('raw JSON').uncheck()
    await page.locator('input[name=batch]').fill('')

    await page.locator('input[name=async]').check()
    await runJob('web2', 'test.ping')
    expect(await page.getByTestId('brine-command').innerText()).toBe('brine --async web2 test.ping')
    expect(await page.locator('p.started a').innerText()).toMatch(/^\d{20}$/)
    expect(await page.locator('table.returns').count()).toBe(0)
    await page.locator('input[name=async]').uncheck()
  })

  it('names the rule when a restricted user is refused cmd.run, and sends an expired or revoked session back to login', async () => {
    await logOut()
    await logIn('alice')
    await runJob('web1', 'cmd.run', 'id')
    const refusal = page.locator('.problem.refused')
    await refusal.waitFor()
    const text = await refusal.innerText()
    expect(text).toContain("Refused by the master's ACL (external_auth, 401)")
    expect(text).toContain('user "alice" may not run "cmd.run" on web1')
    expect(text).toContain('Rules of alice (file): [{"*":["test.*"]},{"@runner":["jobs\\\\..*"]}]')
    await shoot('refused')

    // A token revoked behind the page's back: the next call answers 401 and the page returns to login.
    const token = await page.evaluate(
      () =>
        (
          JSON.parse(
            (globalThis as unknown as { sessionStorage: { getItem(key: string): string | null } }).sessionStorage.getItem('brine.console.session') ?? '{}',
          ) as { token?: string }
        ).token,
    )
    expect(token).toMatch(/^[0-9a-f]{64}$/)
    const revoked = await page.evaluate(
      async (value) => (await fetch('/logout', { method: 'POST', headers: { 'X-Auth-Token': value!, Accept: 'application/json' } })).status,
      token,
    )
    expect(revoked).toBe(200)
    await page.locator('header a[data-page=jobs]').click()
    await page.getByRole('button', { name: 'Log in' }).waitFor()
    expect(await page.getByRole('status').innerText()).toMatch(/^Your session ended: /)

    // A token that expires (token_expire_user_override lets shortlived ask for 3 s): back to login with a message.
    await logIn('shortlived', 3)
    await page.locator('header a[data-page=minions]').waitFor()
    await page.getByRole('button', { name: 'Log in' }).waitFor()
    expect(await page.getByRole('status').innerText()).toBe('Your session expired; please log in again.')
    await shoot('expired')
  })

  it('ran every page without a script error or a Content-Security-Policy violation', () => {
    expect(problems).toEqual([])
  })
})
