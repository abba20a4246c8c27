// `tollgate reload --all` across three gateways on one Redis (issue #26): the command asks
// one instance, every instance reloads its own file, and each answers with its id and the
// hash it now runs; the command prints each answer and fails when one refused.
import { spawn } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { chatWith } from '../helpers/http.ts'
import { REDIS_URL, testNamespace } from '../helpers/redis.ts'

const ROOT = resolve(import.meta.dirname, '../..')

function cli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [join(ROOT, 'src/cli.ts'), ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c))
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c))
  return new Promise((done) => child.once('exit', (code) => done({ code, stdout, stderr })))
}

interface Answer {
  readonly instance: string
  readonly outcome: string
  readonly hash: string
  readonly file_hash: string | null
  readonly problems: string[]
}

t.test('reload --all: every instance on the Redis reloads and reports the new hash', async (t) => {
  const space = testNamespace(t, 'reload-fleet', 'reload-fleet-test')
  const { prefix } = space.fresh()
  const adminToken = `adm_${randomBytes(16).toString('hex')}`
  const shared = {
    adminToken,
    env: { REDIS_URL, TOLLGATE_KEY_SECRET: randomBytes(24).toString('hex') },
    config: (doc: Record<string, unknown>) => {
      ;(doc.store as Record<string, unknown>).keyPrefix = prefix
      doc.plans = { defaultTier: 'Basic', tiers: { Basic: { default: { rpm: 500 } } } }
    },
  }
  const gateways: RunningTollgate[] = []
  for (let i = 0; i < 3; i++) {
    const gw = await startTollgate(shared)
    t.teardown(() => gw.stop())
    gateways.push(gw)
  }
  const [first] = gateways as [RunningTollgate]
  const env = { TOLLGATE_URL: first.url, TOLLGATE_ADMIN_TOKEN: adminToken }
  const { key } = await first.createKey()

  const doc = parse(readFileSync(first.configPath, 'utf8')) as Record<string, unknown>
  doc.plans = { defaultTier: 'Basic', tiers: { Basic: { default: { rpm: 900 } } } }
  const text = stringify(doc)
  const hash = createHash('sha256').update(text).digest('hex')
  for (const gw of gateways) writeFileSync(gw.configPath, text)

  const run = await cli(['reload', '--all', '--json'], env)
  t.equal(run.code, 0, `exit 0 ${run.stderr}`)
  const reply = JSON.parse(run.stdout) as { asked: number; data: Answer[] }
  t.equal(reply.asked, 3, 'the request reached three instances')
  t.equal(reply.data.length, 3, 'and three answered')
  t.equal(new Set(reply.data.map((a) => a.instance)).size, 3, 'each with its own instance id')
  t.same(
    reply.data.map((a) => [a.outcome, a.hash, a.file_hash]),
    [
      ['applied', hash, hash],
      ['applied', hash, hash],
      ['applied', hash, hash],
    ],
    'each runs the new file',
  )
  for (const gw of gateways) {
    const res = await chatWith(gw.url, key, 'gpt-oss-120b', 3)
    t.equal(res.headers.get('x-ratelimit-limit-requests'), '900', `${gw.url} admits on the new rpm`)
    await res.arrayBuffer()
  }

  // The table, as a person reads it: one line per instance, and the count.
  const table = await cli(['reload', '--all'], env)
  t.equal(table.code, 0)
  t.match(table.stdout, /^INSTANCE\s+HOST\s+PID\s+OUTCOME\s+SHA256 IN FORCE\s+PROBLEMS$/m)
  t.equal(table.stdout.split('\n').filter((l) => l.includes(`unchanged  ${hash}`)).length, 3, 'three unchanged')
  t.match(table.stdout, /3 answered of 3 reached within 5000 ms/)

  // One instance's file is bad: it refuses and says why, the others go on; the command fails.
  const third = gateways[2] as RunningTollgate
  writeFileSync(third.configPath, text.replace('rpm: 900', 'rpm: -1'))
  const mixed = await cli(['reload', '--all', '--json'], env)
  t.equal(mixed.code, 1, 'exit 1: one instance refused')
  const answers = (JSON.parse(mixed.stdout) as { data: Answer[] }).data
  t.equal(answers.length, 3)
  const refused = answers.filter((a) => a.outcome === 'invalid')
  t.equal(refused.length, 1, 'one refusal')
  t.equal(refused[0]?.hash, hash, 'which still runs the previous file')
  t.match(refused[0]?.problems, [/^plans\.tiers\.Basic\.default\.rpm: /])
  t.equal(answers.filter((a) => a.outcome === 'unchanged').length, 2)
})
