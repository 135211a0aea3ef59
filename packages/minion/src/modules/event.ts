/**
 * Salt's `event` module, the part that talks to the master: `event.send` and `event.fire_master`. A minion may
 * fire only under its own `salt/minion/<id>/` on the master's bus (the master refuses anything else), so a tag
 * given outside it is put under it: `deploy/done` from web1 arrives as `salt/minion/web1/deploy/done`.
 */
import { isMinionOwnTag, tagProblem, tags } from '@brine/protocol'
import { cleanKwargs } from './args.js'
import { InvocationError } from '../errors.js'
import type { JobContext, ModuleDefinition } from './types.js'

/** The tag as the master will see it: the minion's own tags as they are, any other under `salt/minion/<id>/`. */
export function minionEventTag(id: string, tag: string): string {
  return isMinionOwnTag(id, tag) ? tag : `${tags.minionPrefix(id)}${tag.replace(/^\/+/, '')}`
}

function checkTag(tag: unknown): string {
  if (typeof tag !== 'string' || tag.trim() === '') throw new InvocationError('tag must be a non-empty string')
  return tag
}

function checkData(data: unknown): Record<string, unknown> {
  if (data === undefined || data === null || data === '') return {}
  if (typeof data !== 'object' || Array.isArray(data)) throw new InvocationError('data must be a mapping')
  return data as Record<string, unknown>
}

async function fire(ctx: JobContext, tag: string, data: Record<string, unknown>): Promise<boolean> {
  if (ctx.fireMaster === undefined) throw new InvocationError('this minion has no master to send events to')
  // The master holds every event to tagProblem and refuses the whole batch; saying so here names the tag's fault
  // to the caller at once, before anything is sent.
  const full = minionEventTag(ctx.id, tag)
  const problem = tagProblem(full)
  if (problem !== undefined) throw new InvocationError(`tag ${problem}`)
  await ctx.fireMaster([{ tag: full, data: { ...data, id: ctx.id } }])
  return true
}

export const eventModule: ModuleDefinition = {
  send: {
    doc: "Send an event to the master's event bus, under salt/minion/<id>/ (Brine: a minion fires only its own tags).\n\nKeyword arguments other than with_grains are added to the data.\n\nCLI Example:\n\n    brine '*' event.send myco/mytag foo=Foo bar=Bar\n    brine '*' event.send myco/mytag '{foo: Foo}' with_grains=True",
    args: ['tag', 'data'],
    defaults: { data: null },
    kwargs: true,
    run: async ([tag, data], kwargs, ctx) => {
      const { with_grains: withGrains, ...extra } = cleanKwargs(kwargs)
      const payload: Record<string, unknown> = { ...checkData(data), ...extra }
      if (withGrains === true) payload['grains'] = { ...ctx.grains }
      return fire(ctx, checkTag(tag), payload)
    },
  },
  fire_master: {
    doc: "Fire an event to the master's event bus (data first, then tag, as Salt's), under salt/minion/<id>/.\n\nCLI Example:\n\n    brine '*' event.fire_master '{\"data\": \"my event data\"}' tag",
    args: ['data', 'tag'],
    run: async ([data, tag], _kwargs, ctx) => fire(ctx, checkTag(tag), checkData(data)),
  },
}
