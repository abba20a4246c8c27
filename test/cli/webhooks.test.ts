// `tollgate webhooks …` against a running gateway: create prints the secret once, the
// deliveries and one delivery's attempts show what the receiver answered, replay sends the
// event again, and bad usage is exit code 64 with a message.
import t from 'tap'
import { runWebhooksCommand } from '../../src/cli/webhooks.ts'
import { pollUntil } from '../helpers/poll.ts'
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts'
import { ADMIN_TOKEN, startEventsGateway } from '../webhooks/harness.ts'

t.test('webhooks create, list, show, update, test, deliveries, delivery, replay, rotate-secret, delete', async (t) => {
  const gw = await startEventsGateway(t, 'embedded')
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  const env = { TOLLGATE_URL: gw.url, TOLLGATE_ADMIN_TOKEN: ADMIN_TOKEN }
  const cli = async (...args: string[]) => {
    let stdout = ''
    let stderr = ''
    const code = await runWebhooksCommand(args, {
      env,
      stdout: (s) => (stdout += s),
      stderr: (s) => (stderr += s),
    })
    return { code, stdout, stderr }
  }

  const created = await cli('create', '--endpoint-url', receiver.url, '--event', 'webhook.test', '--json')
  t.equal(created.code, 0, created.stderr)
  const endpoint = JSON.parse(created.stdout) as { id: string; secret: string; events: string[] }
  t.match(endpoint, { id: /^whe_/, secret: /^whsec_/, events: ['webhook.test'] })
  receiver.secret = endpoint.secret
  const table = await cli('list')
  t.match(table.stdout, /ID\s+URL\s+EVENTS\s+ENABLED/)
  t.match(table.stdout, endpoint.id)
  t.notMatch(table.stdout, endpoint.secret, 'no secret in a list')
  const shown = await cli('show', endpoint.id)
  t.match(shown.stdout, /Events:\s+webhook\.test/)
  t.notMatch(shown.stdout, 'whsec_')
  const updated = await cli('update', endpoint.id, '--description', 'ops pager', '--all-events')
  t.match(updated.stdout, /Description:\s+ops pager/)
  t.match(updated.stdout, /Events:\s+\(all\)/)

  t.equal((await cli('test', endpoint.id)).code, 0)
  const delivered = await pollUntil(
    () => cli('deliveries', endpoint.id, '--json'),
    (r) => (JSON.parse(r.stdout) as { data: Array<{ status: string }> }).data[0]?.status === 'delivered',
    400,
    25,
  )
  t.ok(delivered.met, 'the test event was delivered')
  const [first] = (JSON.parse(delivered.value.stdout) as { data: Array<{ id: string; event_id: string }> }).data
  const history = await cli('deliveries', endpoint.id)
  t.match(history.stdout, /DELIVERY\s+EVENT\s+TYPE\s+STATUS\s+ATTEMPTS\s+LAST HTTP/)
  t.match(history.stdout, /webhook\.test\s+delivered\s+1\s+204/)
  const one = await cli('delivery', endpoint.id, String(first?.id))
  t.match(one.stdout, /AT\s+HTTP\s+ERROR\s+MS/)
  t.match(one.stdout, / 204 /)
  t.equal((await cli('replay', endpoint.id, String(first?.id))).code, 0)
  const replayed = await pollUntil(
    async () => receiver.accepted().get(String(first?.event_id))?.length ?? 0,
    (n) => n === 2,
    400,
    25,
  )
  t.ok(replayed.met, 'the replay arrived, with the same webhook-id')

  const rotated = await cli('rotate-secret', endpoint.id)
  t.match(rotated.stdout, /New secret for whe_\w+ \(shown once, keep it\): whsec_/)
  const removed = await cli('delete', endpoint.id)
  t.match(removed.stdout, `Deleted webhook endpoint ${endpoint.id}`)
  const gone = await cli('show', endpoint.id)
  t.equal(gone.code, 1)
  t.match(gone.stderr, /404 not_found: No such webhook endpoint/)
})

t.test('bad usage is 64 with a message', async (t) => {
  const io = (sink: { out: string; err: string }) => ({
    env: { TOLLGATE_ADMIN_TOKEN: 'x', TOLLGATE_URL: 'http://127.0.0.1:9' },
    stdout: (s: string) => (sink.out += s),
    stderr: (s: string) => (sink.err += s),
  })
  const sink = { out: '', err: '' }
  t.equal(await runWebhooksCommand(['create'], io(sink)), 64)
  t.match(sink.err, /needs --endpoint-url/)
  t.equal(await runWebhooksCommand(['update', 'whe_x'], io(sink)), 64)
  t.match(sink.err, /needs something to change/)
  t.equal(await runWebhooksCommand(['replay', 'whe_x'], io(sink)), 64)
  t.match(sink.err, /needs an endpoint id and a delivery id/)
  t.equal(await runWebhooksCommand(['nope'], io(sink)), 64)
  t.equal(await runWebhooksCommand(['help'], io(sink)), 0)
  t.match(sink.out, /Usage: tollgate webhooks/)
})
