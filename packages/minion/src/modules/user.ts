/**
 * Salt's `user` (salt/modules/useradd.py) and `group` (salt/modules/groupadd.py) modules: accounts
 * read through getent (so NSS sources count, as Salt's pwd/grp do) and changed with the shadow
 * utilities (useradd, usermod, userdel, groupadd, groupdel, gpasswd), each name checked first.
 */
import { CommandExecutionError } from '../errors.js'
import type { CommandResult } from './cmd.js'
import type { JobContext, ModuleDefinition } from './types.js'
import { execArgv, isSet, optionalInteger, optionalString, requireAccountName, requirePath, toBool, toStringList } from './validate.js'

async function getent(ctx: JobContext, database: 'passwd' | 'group', key?: string): Promise<string[][]> {
  const result = await execArgv(ctx, ['getent', database, ...(key === undefined ? [] : [key])], { timeout: 60 })
  // getent exits 2 when the key is not found: no entries, not an error.
  if (result.retcode !== 0) return []
  return result.stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(':'))
}

const succeeded = (result: CommandResult): boolean => result.retcode === 0

/** Every group `name` is in, primary included, sorted (Salt's user.list_groups). */
async function groupsOf(ctx: JobContext, name: string, gid: number): Promise<string[]> {
  const groups = new Set<string>()
  for (const [group, , id, members] of await getent(ctx, 'group')) {
    if (group === undefined) continue
    if (Number(id) === gid || (members ?? '').split(',').includes(name)) groups.add(group)
  }
  return [...groups].sort()
}

/** Salt's user.info dict, {} when the user does not exist. */
async function userInfo(ctx: JobContext, name: string): Promise<Record<string, unknown>> {
  const [entry] = await getent(ctx, 'passwd', name)
  if (entry === undefined) return {}
  const [user, passwd, uid, gid, gecos, home, shell] = entry
  const [fullname = '', roomnumber = '', workphone = '', homephone = '', ...other] = (gecos ?? '').split(',')
  return {
    name: user,
    passwd,
    uid: Number(uid),
    gid: Number(gid),
    home,
    shell,
    fullname,
    roomnumber,
    workphone,
    homephone,
    other: other.join(','),
    groups: await groupsOf(ctx, user as string, Number(gid)),
  }
}

function groupInfoOf(entry: string[]): Record<string, unknown> {
  const [name, passwd, gid, members] = entry
  return { name, passwd, gid: Number(gid), members: (members ?? '').split(',').filter(Boolean) }
}

async function mustExist(ctx: JobContext, name: string): Promise<Record<string, unknown>> {
  const info = await userInfo(ctx, name)
  if (info.name === undefined) throw new CommandExecutionError(`User '${name}' does not exist`, { user: name })
  return info
}

function addArgv(args: unknown[]): string[] {
  const [nameArg, uid, gid, groups, home, shell, unique, system, fullname, roomnumber, workphone, homephone, other, createhome] = args
  const name = requireAccountName(nameArg, 'name')
  const argv = ['useradd']
  const uidValue = optionalInteger(uid, 'uid', 0, 2 ** 31 - 2)
  if (uidValue !== undefined) argv.push('-u', String(uidValue))
  if (isSet(gid)) argv.push('-g', /^\d+$/.test(String(gid)) ? String(gid) : requireAccountName(gid, 'gid'))
  if (isSet(groups))
    argv.push(
      '-G',
      toStringList(groups, 'groups')
        .map((group) => requireAccountName(group, 'groups'))
        .join(','),
    )
  if (isSet(home)) argv.push('-d', requirePath(home, 'home'))
  if (isSet(shell)) argv.push('-s', requirePath(shell, 'shell'))
  if (!toBool(unique, 'unique')) argv.push('-o')
  if (toBool(system, 'system')) argv.push('-r')
  argv.push(toBool(createhome, 'createhome') ? '-m' : '-M')
  const gecos = [fullname, roomnumber, workphone, homephone, other].map((field) => optionalString(field === '' ? null : field, 'fullname') ?? '')
  if (gecos.some((field) => field.includes(':') || field.includes(',')))
    throw new CommandExecutionError("fullname, roomnumber, workphone, homephone and other must not contain ':' or ','", { user: name })
  if (gecos.some(Boolean)) argv.push('-c', gecos.join(',').replace(/,+$/, ''))
  argv.push('--', name)
  return argv
}

const ADD_ARGS = [
  'name',
  'uid',
  'gid',
  'groups',
  'home',
  'shell',
  'unique',
  'system',
  'fullname',
  'roomnumber',
  'workphone',
  'homephone',
  'other',
  'createhome',
  'loginclass',
  'nologinit',
  'root',
  'usergroup',
]
const ADD_DEFAULTS = {
  uid: null,
  gid: null,
  groups: null,
  home: null,
  shell: null,
  unique: true,
  system: false,
  fullname: '',
  roomnumber: '',
  workphone: '',
  homephone: '',
  other: '',
  createhome: true,
  loginclass: null,
  nologinit: false,
  root: null,
  usergroup: null,
}

export const userModule: ModuleDefinition = {
  info: {
    doc: "Return user information: name, passwd, uid, gid, home, shell, fullname, roomnumber, workphone, homephone, other, groups ({} for an unknown user).\n\nCLI Example:\n\n    brine '*' user.info root",
    args: ['name', 'root'],
    defaults: { root: null },
    run: async ([name], _kwargs, ctx) => await userInfo(ctx, requireAccountName(name, 'name')),
  },
  list_users: {
    doc: "Return a sorted list of all users.\n\nCLI Example:\n\n    brine '*' user.list_users",
    args: ['root'],
    defaults: { root: null },
    run: async (_args, _kwargs, ctx) => [...new Set((await getent(ctx, 'passwd')).map(([name]) => name as string))].sort(),
  },
  getent: {
    doc: "Return the user.info of every user, as a list.\n\nCLI Example:\n\n    brine '*' user.getent",
    args: ['refresh', 'root'],
    defaults: { refresh: false, root: null },
    run: async (_args, _kwargs, ctx) => {
      const infos = []
      for (const [name] of await getent(ctx, 'passwd')) infos.push(await userInfo(ctx, name as string))
      return infos
    },
  },
  list_groups: {
    doc: "Return a sorted list of the groups the user belongs to (its primary group included).\n\nCLI Example:\n\n    brine '*' user.list_groups foo",
    args: ['name'],
    run: async ([name], _kwargs, ctx) => {
      const info = await userInfo(ctx, requireAccountName(name, 'name'))
      return info.name === undefined ? [] : info.groups
    },
  },
  add: {
    doc: "Add a user. Returns True when useradd succeeded.\n\nuid, gid, groups (list or comma-separated), home, shell, unique (default True), system, fullname, roomnumber, workphone, homephone, other, createhome (default True)\n\nCLI Example:\n\n    brine '*' user.add name <uid> <gid> <groups> <home> <shell>\n    brine '*' user.add alice shell=/bin/bash groups=adm,sudo",
    args: ADD_ARGS,
    defaults: ADD_DEFAULTS,
    run: async (args, _kwargs, ctx) => {
      const result = await execArgv(ctx, addArgv(args))
      if (!succeeded(result)) ctx.logger.warning(`user.add ${String(args[0])}: ${result.stderr.trim()}`)
      return succeeded(result)
    },
  },
  delete: {
    doc: "Remove a user (``remove=True`` also removes its home and mail spool; ``force=True`` even while logged in). Returns True when userdel succeeded.\n\nCLI Example:\n\n    brine '*' user.delete name remove=True force=True",
    args: ['name', 'remove', 'force', 'root'],
    defaults: { remove: false, force: false, root: null },
    run: async ([name, remove, force], _kwargs, ctx) => {
      const user = requireAccountName(name, 'name')
      const argv = ['userdel', ...(toBool(remove, 'remove') ? ['-r'] : []), ...(toBool(force, 'force') ? ['-f'] : []), '--', user]
      return succeeded(await execArgv(ctx, argv))
    },
  },
  chshell: {
    doc: "Change the default shell of the user. Returns True when the shell is the one asked for.\n\nCLI Example:\n\n    brine '*' user.chshell foo /bin/zsh",
    args: ['name', 'shell', 'root'],
    defaults: { root: null },
    run: async ([name, shell], _kwargs, ctx) => {
      const user = requireAccountName(name, 'name')
      const path = requirePath(shell, 'shell')
      if ((await mustExist(ctx, user)).shell === path) return true
      await execArgv(ctx, ['usermod', '-s', path, '--', user])
      return (await userInfo(ctx, user)).shell === path
    },
  },
  chhome: {
    doc: "Change the home directory of the user; ``persist=True`` moves the old home's contents there. Returns True when the home is the one asked for.\n\nCLI Example:\n\n    brine '*' user.chhome foo /home/users/foo True",
    args: ['name', 'home', 'persist', 'root'],
    defaults: { persist: false, root: null },
    run: async ([name, home, persist], _kwargs, ctx) => {
      const user = requireAccountName(name, 'name')
      const path = requirePath(home, 'home')
      if ((await mustExist(ctx, user)).home === path) return true
      await execArgv(ctx, ['usermod', '-d', path, ...(toBool(persist, 'persist') ? ['-m'] : []), '--', user])
      return (await userInfo(ctx, user)).home === path
    },
  },
  chgroups: {
    doc: "Change the supplementary groups of the user (a list or comma-separated); ``append=True`` adds to the ones it has. Returns True on success.\n\nCLI Example:\n\n    brine '*' user.chgroups foo wheel,root",
    args: ['name', 'groups', 'append', 'root'],
    defaults: { append: false, root: null },
    run: async ([name, groups, append], _kwargs, ctx) => {
      const user = requireAccountName(name, 'name')
      const list = toStringList(groups, 'groups').map((group) => requireAccountName(group, 'groups'))
      await mustExist(ctx, user)
      return succeeded(await execArgv(ctx, ['usermod', ...(toBool(append, 'append') ? ['-a'] : []), '-G', list.join(','), '--', user]))
    },
  },
}

export const groupModule: ModuleDefinition = {
  info: {
    doc: "Return information about a group: name, passwd, gid, members ({} for an unknown group).\n\nCLI Example:\n\n    brine '*' group.info foo",
    args: ['name', 'root'],
    defaults: { root: null },
    run: async ([name], _kwargs, ctx) => {
      const [entry] = await getent(ctx, 'group', requireAccountName(name, 'name'))
      return entry === undefined ? {} : groupInfoOf(entry)
    },
  },
  getent: {
    doc: "Return the group.info of every group, as a list.\n\nCLI Example:\n\n    brine '*' group.getent",
    args: ['refresh', 'root'],
    defaults: { refresh: false, root: null },
    run: async (_args, _kwargs, ctx) => (await getent(ctx, 'group')).map(groupInfoOf),
  },
  add: {
    doc: "Add the specified group (``gid``, ``system=True`` for a system group). Returns True when groupadd succeeded.\n\nCLI Example:\n\n    brine '*' group.add foo 3456",
    args: ['name', 'gid', 'system', 'root', 'non_unique'],
    defaults: { gid: null, system: false, root: null, non_unique: false },
    run: async ([name, gid, system, , nonUnique], _kwargs, ctx) => {
      const group = requireAccountName(name, 'name')
      const id = optionalInteger(gid, 'gid', 0, 2 ** 31 - 2)
      const argv = [
        'groupadd',
        ...(id === undefined ? [] : ['-g', String(id)]),
        ...(toBool(system, 'system') ? ['-r'] : []),
        ...(toBool(nonUnique, 'non_unique') ? ['-o'] : []),
        '--',
        group,
      ]
      return succeeded(await execArgv(ctx, argv))
    },
  },
  delete: {
    doc: "Remove the named group. Returns True when groupdel succeeded.\n\nCLI Example:\n\n    brine '*' group.delete foo",
    args: ['name', 'root'],
    defaults: { root: null },
    run: async ([name], _kwargs, ctx) => succeeded(await execArgv(ctx, ['groupdel', '--', requireAccountName(name, 'name')])),
  },
  adduser: {
    doc: "Add a user to the group. Returns True on success.\n\nCLI Example:\n\n    brine '*' group.adduser foo bar",
    args: ['name', 'username', 'root'],
    defaults: { root: null },
    run: async ([name, username], _kwargs, ctx) =>
      succeeded(await execArgv(ctx, ['gpasswd', '-a', requireAccountName(username, 'username'), requireAccountName(name, 'name')])),
  },
  deluser: {
    doc: "Remove a user from the group. Returns True on success (and when the user was not in it).\n\nCLI Example:\n\n    brine '*' group.deluser foo bar",
    args: ['name', 'username', 'root'],
    defaults: { root: null },
    run: async ([name, username], _kwargs, ctx) => {
      const group = requireAccountName(name, 'name')
      const user = requireAccountName(username, 'username')
      const [entry] = await getent(ctx, 'group', group)
      if (entry === undefined) throw new CommandExecutionError(`Group '${group}' does not exist`, { group })
      if (!(groupInfoOf(entry).members as string[]).includes(user)) return true
      return succeeded(await execArgv(ctx, ['gpasswd', '-d', user, group]))
    },
  },
  members: {
    doc: "Replace the members of the group with a comma-separated list (or a list). Returns True on success.\n\nCLI Example:\n\n    brine '*' group.members foo 'user1,user2,user3'",
    args: ['name', 'members_list', 'root'],
    defaults: { root: null },
    run: async ([name, membersList], _kwargs, ctx) => {
      const members = toStringList(membersList ?? '', 'members_list').map((member) => requireAccountName(member, 'members_list'))
      return succeeded(await execArgv(ctx, ['gpasswd', '-M', members.join(','), requireAccountName(name, 'name')]))
    },
  },
}
