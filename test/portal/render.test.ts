// The portal's templates escape what they are given; the CSV defuses formulas; the chart is
// numbers and escaped labels only.
import t from 'tap'
import { stackedBars } from '../../src/portal/chart.ts'
import { escapeHtml, html, raw } from '../../src/portal/html.ts'
import { usageCsv, usageReport } from '../../src/portal/usage-report.ts'
import type { UsageRecord } from '../../src/store/ports.ts'

t.test('html`` escapes values, attributes included; Html values and arrays compose', async (t) => {
  const name = '"><script>alert(1)</script>\'&'
  const out = html`<input value="${name}"><p title='${name}'>${name}</p>${[html`<b>${name}</b>`, 'x']}`.text
  t.notMatch(out, /<script>/)
  t.notMatch(out, /value=""/)
  t.match(out, '&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&#39;&amp;')
  t.match(out, '<b>&quot;')
  t.equal(html`${null}${undefined}${false}${0}`.text, '0')
  t.equal(html`${raw('<i>ok</i>')}`.text, '<i>ok</i>')
  t.equal(escapeHtml('a<b'), 'a&lt;b')
})

const row = (over: Partial<UsageRecord>): UsageRecord => ({
  keyId: 'key_a',
  owner: 'usr_1',
  tier: 'Basic',
  model: 'm',
  day: '2026-11-20',
  requests: 1,
  inputTokens: 10,
  outputTokens: 5,
  costNanos: 1_500_000,
  ...over,
})

t.test('usage report: every day of the range, sums per model and key', async (t) => {
  const rows = [row({}), row({ day: '2026-11-22', model: 'n', requests: 2, inputTokens: 7 }), row({ keyId: 'key_b' })]
  const report = usageReport(rows, '2026-11-19', '2026-11-22')
  t.same(
    report.days.map((d) => d.day),
    ['2026-11-19', '2026-11-20', '2026-11-21', '2026-11-22'],
  )
  t.same(
    report.days.map((d) => d.requests),
    [0, 2, 0, 2],
  )
  t.same(report.totals, {
    requests: 4,
    input_tokens: 27,
    output_tokens: 15,
    cost: 0.0045,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    cache_read_cost: 0,
    cache_write_cost: 0,
    cached_requests: 0,
    batch_requests: 0,
    batch_cost: 0,
  })
  t.same(
    report.byModel.map((r) => [r.model, r.requests]),
    [
      ['m', 2],
      ['n', 2],
    ],
  )
  t.same(
    report.byKey.map((r) => [r.key_id, r.requests]),
    [
      ['key_a', 3],
      ['key_b', 1],
    ],
  )
})

t.test(
  'CSV: a header, one line per row, quoted where needed, formulas defused, exact costs with their currency',
  async (t) => {
    const csv = usageCsv(
      [
        row({}),
        row({ keyId: 'key_b', model: 'x,y' }),
        row({ day: '2026-11-21', costNanos: 480 }),
        row({ day: '2026-11-22', costNanos: 0 }),
        row({
          day: '2026-11-23',
          keyId: 'key_b',
          cacheReadTokens: 6,
          cacheWriteTokens: 3,
          cacheReadCostNanos: 180,
          cacheWriteCostNanos: 1_125_000,
        }),
      ],
      new Map([
        ['key_a', '=HYPERLINK("evil")'],
        ['key_b', 'plain'],
      ]),
      'EUR',
    )
    const lines = csv.trimEnd().split('\r\n')
    t.equal(
      lines[0],
      'day,key_id,key_name,model,requests,input_tokens,output_tokens,cost,currency,cache_read_tokens,cache_write_tokens,cache_read_cost,cache_write_cost,cached_requests,batch_requests,batch_cost',
    )
    t.equal(lines[1], `2026-11-20,key_a,"'=HYPERLINK(""evil"")",m,1,10,5,0.0015,EUR,0,0,0.00,0.00,0,0,0.00`)
    t.equal(lines[2], '2026-11-20,key_b,plain,"x,y",1,10,5,0.0015,EUR,0,0,0.00,0.00,0,0,0.00')
    t.equal(
      lines[3],
      `2026-11-21,key_a,"'=HYPERLINK(""evil"")",m,1,10,5,0.00000048,EUR,0,0,0.00,0.00,0,0,0.00`,
      'a tiny cost exactly, not 0.00 nor 4.8e-7',
    )
    t.equal(lines[4], `2026-11-22,key_a,"'=HYPERLINK(""evil"")",m,1,10,5,0.00,EUR,0,0,0.00,0.00,0,0,0.00`)
    t.equal(
      lines[5],
      '2026-11-23,key_b,plain,m,1,10,5,0.0015,EUR,6,3,0.00000018,0.001125,0,0,0.00',
      "a prompt cache's reads and writes, their exact costs, after the currency",
    )
  },
)

t.test('chart: an accessible SVG with one bar per non-zero value, labels escaped', async (t) => {
  const svg = stackedBars(
    'Tokens <per> day',
    ['2026-11-01', '2026-11-02'],
    [{ name: 'In & out', colour: '#000', values: [3, 0] }],
  ).text
  t.match(
    svg,
    /^<div class="chart-scroll" tabindex="0" role="region" aria-label="[^"]*"><svg class="chart" role="img" aria-labelledby="/,
  )
  t.match(svg, '<title id="chart-t-tokens-per-day">Tokens &lt;per&gt; day</title>')
  t.equal(
    svg.match(/<rect x="[\d.]+" y="[\d.]+" width="[\d.]+" height="[\d.]+" fill="#000"><title>/g)?.length,
    1,
    'one bar',
  )
  t.match(svg, 'In &amp; out')
  t.notMatch(svg, /style=|<script/)
})

t.test('usage page: the requests the response cache answered, in the totals and every table', async (t) => {
  const { usagePage } = await import('../../src/portal/pages/usage.ts')
  const rows = [
    row({ requests: 5, cachedRequests: 3 }),
    row({ keyId: 'key_b', model: 'n', requests: 2, cachedRequests: 0 }),
    row({ day: '2026-11-21', requests: 1, cachedRequests: 1 }),
  ]
  const report = usageReport(rows, '2026-11-20', '2026-11-21')
  t.equal(report.totals.cached_requests, 4)
  const page = usagePage({ username: 'ann', isAdmin: false, csrfToken: 'x' }, [], null, report, '/csv', 'EUR').text
  t.match(page, /data-total="cached_requests">4</, 'the totals card')
  const heads = page.match(/<th scope="col" class="num"[^>]*>Cached replies<\/th>/g) ?? []
  t.equal(heads.length, 4, 'a column in the per-model, per-key, per-day and per-day-and-model tables')
  const rowOf = (label: string): string[] => {
    const tr = page.match(new RegExp(`<tr><th scope="row">(?:<a[^>]*>)?${label}[^]*?</tr>`))?.[0] ?? ''
    return [...tr.matchAll(/<td class="num">([^<]*)<\/td>/g)].map((m) => m[1] ?? '')
  }
  t.equal(rowOf('m').at(-3), '4', "model m's cached replies, before the batch columns as in the CSV")
  t.equal(rowOf('n').at(-3), '0')
  t.equal(rowOf('2026-11-20').at(-3), '3', 'per day')
  t.equal(rowOf('2026-11-21').at(-3), '1')
  t.equal(rowOf('key_b').at(-3), '0', 'per key')
  t.equal(rowOf('m').length, 11, 'eleven numbers a row')
  const empty = usagePage(
    { username: 'ann', isAdmin: false, csrfToken: 'x' },
    [],
    null,
    usageReport([], '2026-11-20', '2026-11-20'),
    '/csv',
    'EUR',
  ).text
  t.match(empty, 'colspan="12"', 'the empty row spans the new columns too')
  t.match(empty, 'colspan="13"', 'and the day-and-model table its two label columns')
})

t.test('batch lines: how many of the requests and what of the cost, exact, in the CSV and every table', async (t) => {
  const { usagePage } = await import('../../src/portal/pages/usage.ts')
  const rows = [
    // Three requests, two of them batch lines at a batch price: 2 × 612_345 nano-units.
    row({ requests: 3, costNanos: 1_500_000 + 1_224_690, batchRequests: 2, batchCostNanos: 1_224_690 }),
    row({ keyId: 'key_b', model: 'n' }),
    row({ day: '2026-11-21', requests: 1, costNanos: 7, batchRequests: 1, batchCostNanos: 7 }),
  ]
  const lines = usageCsv(rows, new Map(), 'EUR').trimEnd().split('\r\n')
  t.match(lines[0], /,cached_requests,batch_requests,batch_cost$/, 'the batch columns last')
  t.equal(lines[1], '2026-11-20,key_a,,m,3,10,5,0.00272469,EUR,0,0,0.00,0.00,0,2,0.00122469', 'exact nano-units')
  t.equal(lines[2], '2026-11-20,key_b,,n,1,10,5,0.0015,EUR,0,0,0.00,0.00,0,0,0.00', 'a row without batch lines')
  t.equal(lines[3], '2026-11-21,key_a,,m,1,10,5,0.000000007,EUR,0,0,0.00,0.00,0,1,0.000000007', 'a tiny batch cost')

  const report = usageReport(rows, '2026-11-20', '2026-11-21')
  t.equal(report.totals.batch_requests, 3)
  t.equal(report.totals.batch_cost, 0.001224697)
  const page = usagePage({ username: 'ann', isAdmin: false, csrfToken: 'x' }, [], null, report, '/csv', 'EUR').text
  t.match(page, /data-total="batch_requests">3</, 'the totals card: batch lines')
  t.match(page, /data-total="batch_cost" data-value="0.001224697"/, 'and their cost')
  const heads = page.match(/<th scope="col" class="num"[^>]*>Batch lines<\/th>/g) ?? []
  t.equal(heads.length, 4, 'a column in the per-model, per-key, per-day and per-day-and-model tables')
  t.equal((page.match(/>Batch cost \(EUR\)<\/th>/g) ?? []).length, 4, 'and one of their cost')
  const rowOf = (label: string): string[] => {
    const tr = page.match(new RegExp(`<tr><th scope="row">(?:<a[^>]*>)?${label}[^]*?</tr>`))?.[0] ?? ''
    return [...tr.matchAll(/<td class="num">([^<]*)<\/td>/g)].map((m) => m[1] ?? '')
  }
  t.equal(rowOf('m').at(-2), '3', "model m's batch lines")
  t.equal(rowOf('n').at(-2), '0')
  t.equal(rowOf('2026-11-21').at(-2), '1', 'per day')
  t.not(rowOf('m').at(-1), '0.00', "model m's batch cost is shown")
})
