import { describe, expect, it } from 'vitest'
import { packageChanges } from '../src/modules/pkg.js'
import { parseJustPrint, parseUpdate } from '../src/modules/pkg-apt.js'
import { parseCheckUpdate } from '../src/modules/pkg-dnf.js'
import { unitNames } from '../src/modules/service.js'

// The tools' output as they print it, for the providers this host cannot run (systemd, dnf) and apt's network side.
describe('provider output parsers', () => {
  it('systemctl list-units / list-unit-files: service names without .service, other units left out', () => {
    const listUnits = [
      '  cron.service            loaded active running Regular background program processing daemon',
      '● nginx.service           loaded failed failed  A high performance web server',
      '  getty@tty1.service      loaded active running Getty on tty1',
      '  systemd-journald.socket loaded active running Journal Socket',
    ].join('\n')
    const unitFiles = ['cron.service enabled enabled', 'ssh.service enabled enabled', 'nginx.service disabled enabled'].join('\n')
    expect(unitNames(listUnits)).toEqual(['cron', 'getty@tty1', 'nginx'])
    expect(unitNames(unitFiles)).toEqual(['cron', 'nginx', 'ssh'])
  })

  it('apt-get update: Get → True, Hit → None, Ign/Err → False per repository', () => {
    const output = [
      'Hit:1 http://deb.debian.org/debian bookworm InRelease',
      'Get:2 http://security.debian.org/debian-security bookworm-security InRelease [48.0 kB]',
      'Err:3 http://example.invalid/repo stable InRelease',
      'Reading package lists...',
    ].join('\n')
    expect(parseUpdate(output)).toEqual({
      'http://deb.debian.org/debian bookworm': null,
      'http://security.debian.org/debian-security bookworm-security': true,
      'http://example.invalid/repo stable': false,
    })
  })

  it('apt-get --just-print dist-upgrade and dnf check-update: name → new version', () => {
    const apt = [
      'Inst libc6 [2.36-9] (2.36-9+deb12u4 Debian:12.5/stable [amd64])',
      'Inst newpkg (1.0-1 Debian:12.5/stable [all])',
      'Conf libc6 (2.36-9+deb12u4 Debian:12.5/stable [amd64])',
    ].join('\n')
    expect(parseJustPrint(apt)).toEqual({ libc6: '2.36-9+deb12u4', newpkg: '1.0-1' })
    const dnf = ['', 'kernel.x86_64          5.14.0-362.el9      baseos', 'openssl-libs.x86_64    1:3.0.7-25.el9      baseos', 'Obsoleting Packages'].join('\n')
    expect(parseCheckUpdate(dnf)).toEqual({ kernel: '5.14.0-362.el9', 'openssl-libs': '1:3.0.7-25.el9' })
  })

  it("changes are Salt's {name: {old, new}} with '' for absent", () => {
    expect(packageChanges({ a: '1', b: '2', c: '3' }, { a: '1', b: '2.1', d: '4' })).toEqual({
      b: { old: '2', new: '2.1' },
      c: { old: '3', new: '' },
      d: { old: '', new: '4' },
    })
  })
})
