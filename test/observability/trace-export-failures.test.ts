// Traces sent to an OTLP endpoint that is down: the SDK drops the batches and says nothing.
// The gateway counts each failed export (tollgate_trace_export_errors_total) and says the
// outage once when it starts and once when the receiver takes spans again.
import t from 'tap'
import { closedPort, startTollgate } from '../helpers/gateway.ts'
import { startOtlpReceiver } from '../helpers/otlp-receiver.ts'
import { eventually } from '../limits/helpers.ts'
import { freshKeyClient } from '../helpers/sdk-gateway.ts'

const STARTS = 'traces: export to the OTLP endpoint failed'
const ENDS = 'traces: export to the OTLP endpoint succeeded again'

const port = await closedPort()
const gw = await startTollgate({
  config: (doc) => {
    doc.tracing = { enabled: true }
  },
  env: {
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
    OTEL_BSP_SCHEDULE_DELAY: '50',
    OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
  },
})
t.teardown(() => gw.stop())
const client = await freshKeyClient(gw)
const call = (): Promise<unknown> =>
  client.chat.completions.create({
    model: 'Mistral-Small-24B-Instruct-2501',
    messages: [{ role: 'user', content: 'hello' }],
    max_tokens: 3,
  })

async function exportErrors(): Promise<number> {
  const text = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
  return Number(/^tollgate_trace_export_errors_total (\S+)$/m.exec(text)?.[1] ?? NaN)
}
const said = (start: string): Array<Record<string, unknown>> =>
  gw.logs().filter((l) => typeof l.msg === 'string' && l.msg.startsWith(start))

t.test('the receiver down: each failed export counted, one warning', async (t) => {
  const before = await exportErrors()
  t.ok(Number.isFinite(before), 'the counter is exported')
  for (let i = 1; i <= 3; i++) {
    await call()
    t.ok(await eventually(async () => (await exportErrors()) >= before + i, 200, 50), `export ${i} counted as failed`)
  }
  const lines = said(STARTS)
  t.equal(lines.length, 1, 'one warning for the outage')
  t.match(lines[0], { level: 40, err: String })
})

t.test('the receiver back: spans arrive, and the end of the outage is said', async (t) => {
  const receiver = await startOtlpReceiver(port)
  t.teardown(() => receiver.close())
  await call()
  await receiver.waitFor((spans) => (spans.length > 0 ? true : undefined), 'spans after the outage')
  t.ok(await eventually(() => said(ENDS).length === 1, 200, 50), 'one line when exports work again')
  t.match(said(ENDS)[0], { level: 30, durationMs: Number, failures: Number })
  t.ok(Number(said(ENDS)[0]?.failures) >= 3, 'with the failures it saw')
  t.equal(said(STARTS).length, 1, 'still one warning')
})
