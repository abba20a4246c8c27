// `tollgate webhooks …`: webhook endpoints and their deliveries through a running gateway's
// admin API (/admin/webhooks). Same conventions as `tollgate keys` (URL and token from the
// environment or flags, tables by default, --json for scripts). A secret is printed by
// create and rotate-secret only, the one time the API shows it.
import type { ParseArgsConfig } from 'node:util'
import {
  ADMIN_OPTIONS,
  adminSession,
  runCommandGroup,
  UsageError,
  type CliIo,
  type ParsedCommand,
} from './subcommands.ts'
import { fields, table, text } from './table.ts'

export const WEBHOOKS_USAGE = `Usage: tollgate webhooks <command> [options]

Commands:
  create --endpoint-url URL  Add an endpoint; prints its signing secret (shown this once)
      --event TYPE (repeat; default every type)  --description TEXT  --disabled
  list                       List endpoints
  show <id>                  One endpoint
  update <id>                Change an endpoint: --endpoint-url, --event (replaces the list), --all-events,
                             --description, --enable, --disable
  delete <id>                Remove an endpoint and its delivery history
  rotate-secret <id>         A new signing secret, in force at once (printed this once)
  test <id>                  Send a webhook.test event to the endpoint
  deliveries <id>            Its delivery history, newest first: status, attempts, last HTTP status
      --limit N  --after DELIVERY_ID
  delivery <id> <delivery>   One delivery with every attempt
  replay <id> <delivery>     Deliver that event again (same webhook-id)

Event types: key.created key.rotated key.revoked key.expiring key.expired key.rate_limited
  user.created user.disabled user.locked_out deployment.saturated budget.threshold

Options:
  --url URL                  Gateway URL (env TOLLGATE_URL, default HOST and PORT as the gateway reads them)
  --admin-token TOKEN        Admin token (env TOLLGATE_ADMIN_TOKEN, default the one stored in TOLLGATE_DATA_DIR)
  --json                     Print the API's JSON instead of tables
`

const ENDPOINT = {
  'endpoint-url': { type: 'string' },
  event: { type: 'string', multiple: true },
  description: { type: 'string' },
} as const

const OPTIONS = {
  create: { ...ADMIN_OPTIONS, ...ENDPOINT, disabled: { type: 'boolean', default: false } },
  list: ADMIN_OPTIONS,
  show: ADMIN_OPTIONS,
  update: {
    ...ADMIN_OPTIONS,
    ...ENDPOINT,
    'all-events': { type: 'boolean', default: false },
    enable: { type: 'boolean', default: false },
    disable: { type: 'boolean', default: false },
  },
  delete: ADMIN_OPTIONS,
  'rotate-secret': ADMIN_OPTIONS,
  test: ADMIN_OPTIONS,
  deliveries: { ...ADMIN_OPTIONS, limit: { type: 'string' }, after: { type: 'string' } },
  delivery: ADMIN_OPTIONS,
  replay: ADMIN_OPTIONS,
} as const satisfies Record<string, ParseArgsConfig['options']>

type Command = keyof typeof OPTIONS

export function runWebhooksCommand(args: readonly string[], io: CliIo): Promise<number> {
  return runCommandGroup({ name: 'webhooks', usage: WEBHOOKS_USAGE, options: OPTIONS, run }, args, io)
}

async function run(command: Command, options: ParsedCommand, io: CliIo): Promise<number> {
  const { str, list, flag } = options
  const { api, print } = adminSession(options, io)
  const id = (): string => encodeURIComponent(options.sole(`webhooks ${command} needs an endpoint id`))
  const pair = (): [string, string] => {
    const [endpoint, delivery, extra] = options.positionals
    if (endpoint === undefined || delivery === undefined)
      throw new UsageError(`webhooks ${command} needs an endpoint id and a delivery id`)
    if (extra !== undefined) throw new UsageError(`unexpected argument: ${extra}`)
    return [encodeURIComponent(endpoint), encodeURIComponent(delivery)]
  }
  const changes = (): Record<string, unknown> => ({
    ...(str('endpoint-url') === undefined ? {} : { url: str('endpoint-url') }),
    ...(list('event') === undefined ? {} : { events: list('event') }),
    ...(str('description') === undefined ? {} : { description: str('description') }),
  })

  switch (command) {
    case 'create': {
      options.none()
      const body = changes()
      if (body.url === undefined) throw new UsageError('webhooks create needs --endpoint-url')
      if (flag('disabled')) body.enabled = false
      const created = object(await api('POST', '/admin/webhooks', body))
      return print(created, () => `${showEndpoint(created)}\nSecret (shown once, keep it): ${text(created.secret)}\n`)
    }
    case 'list': {
      options.none()
      const reply = object(await api('GET', '/admin/webhooks'))
      const data = rows(reply.data)
      return print(reply, () =>
        data.length === 0
          ? 'No webhook endpoints.\n'
          : table(
              ['ID', 'URL', 'EVENTS', 'ENABLED', 'CREATED'],
              data.map((e) => [text(e.id), text(e.url), events(e.events), text(e.enabled), text(e.created_at)]),
            ),
      )
    }
    case 'show': {
      const endpoint = object(await api('GET', `/admin/webhooks/${id()}`))
      return print(endpoint, () => showEndpoint(endpoint))
    }
    case 'update': {
      const path = `/admin/webhooks/${id()}`
      const body = changes()
      if (flag('all-events')) {
        if ('events' in body) throw new UsageError('--all-events and --event contradict each other')
        body.events = null
      }
      if (flag('enable') && flag('disable')) throw new UsageError('--enable and --disable contradict each other')
      if (flag('enable') || flag('disable')) body.enabled = flag('enable')
      if (Object.keys(body).length === 0) throw new UsageError('webhooks update needs something to change')
      const endpoint = object(await api('PATCH', path, body))
      return print(endpoint, () => showEndpoint(endpoint))
    }
    case 'delete': {
      const endpoint = object(await api('DELETE', `/admin/webhooks/${id()}`))
      return print(endpoint, () => `Deleted webhook endpoint ${text(endpoint.id)} (${text(endpoint.url)}).\n`)
    }
    case 'rotate-secret': {
      const endpoint = object(await api('POST', `/admin/webhooks/${id()}/rotate-secret`))
      return print(
        endpoint,
        () => `New secret for ${text(endpoint.id)} (shown once, keep it): ${text(endpoint.secret)}\n`,
      )
    }
    case 'test': {
      const event = object(await api('POST', `/admin/webhooks/${id()}/test`))
      return print(event, () => `Sent webhook.test as event ${text(event.id)}; see \`tollgate webhooks deliveries\`.\n`)
    }
    case 'deliveries': {
      const limit = str('limit')
      if (limit !== undefined && !/^\d+$/.test(limit)) throw new UsageError('--limit must be a whole number')
      const query = new URLSearchParams({
        ...(limit === undefined ? {} : { limit }),
        ...(str('after') === undefined ? {} : { after: str('after') ?? '' }),
      }).toString()
      const reply = object(await api('GET', `/admin/webhooks/${id()}/deliveries${query === '' ? '' : `?${query}`}`))
      const data = rows(reply.data)
      return print(reply, () =>
        data.length === 0
          ? 'No deliveries.\n'
          : table(
              ['DELIVERY', 'EVENT', 'TYPE', 'STATUS', 'ATTEMPTS', 'LAST HTTP', 'LAST ERROR', 'NEXT ATTEMPT'],
              data.map((d) => [
                text(d.id),
                text(d.event_id),
                text(d.event_type),
                text(d.status),
                text(d.attempts),
                text(d.last_status),
                text(d.last_error),
                text(d.next_attempt_at),
              ]),
            ) + (reply.has_more === true ? `More: --after ${text(data[data.length - 1]?.id)}\n` : ''),
      )
    }
    case 'delivery': {
      const [endpoint, delivery] = pair()
      const d = object(await api('GET', `/admin/webhooks/${endpoint}/deliveries/${delivery}`))
      return print(d, () => {
        const attempts = rows(d.attempt_log)
        return (
          fields([
            ['Delivery', text(d.id)],
            ['Event', `${text(d.event_id)} (${text(d.event_type)})`],
            ['Status', text(d.status)],
            ['Attempts', text(d.attempts)],
            ['Next attempt', text(d.next_attempt_at)],
            ['Replay of', text(d.replay_of)],
          ]) +
          (attempts.length === 0
            ? ''
            : '\n' +
              table(
                ['AT', 'HTTP', 'ERROR', 'MS'],
                attempts.map((a) => [text(a.at), text(a.status), text(a.error), text(a.duration_ms)]),
              ))
        )
      })
    }
    case 'replay': {
      const [endpoint, delivery] = pair()
      const d = object(await api('POST', `/admin/webhooks/${endpoint}/deliveries/${delivery}/replay`))
      return print(d, () => `Replaying event ${text(d.event_id)} as delivery ${text(d.id)}.\n`)
    }
  }
}

function object(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {}
}

const rows = (value: unknown): Record<string, unknown>[] => (Array.isArray(value) ? value.map(object) : [])

const events = (value: unknown): string => (value === null || value === undefined ? '(all)' : text(value))

function showEndpoint(e: Record<string, unknown>): string {
  return fields([
    ['ID', text(e.id)],
    ['URL', text(e.url)],
    ['Events', events(e.events)],
    ['Description', text(e.description)],
    ['Enabled', text(e.enabled)],
    ['Created', text(e.created_at)],
    ['Updated', text(e.updated_at)],
  ])
}
