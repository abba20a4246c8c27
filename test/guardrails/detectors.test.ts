// Each built-in detector: what it must find (true positives) and the near-misses it must
// let pass (a Luhn-invalid card, an IBAN or a tax ID with a wrong check digit, a version
// number, a time of day). The checks run on the detector alone, as a policy runs it.
import t from 'tap'
import { germanTaxIdValid, ibanValid, luhnValid } from '../../src/guardrails/checksums.ts'
import { DETECTORS } from '../../src/guardrails/detectors.ts'
import { generateKey } from '../../src/keys/format.ts'

function found(name: string, text: string): string[] {
  const detector = DETECTORS.get(name)
  if (detector === undefined) throw new Error(`no detector ${name}`)
  return detector.find(text).map((s) => text.slice(s.start, s.end))
}

const tollgateKey = generateKey()
const cases: Record<string, { hits: Array<[string, string]>; misses: string[] }> = {
  email: {
    hits: [
      ['Write to john.doe@example.com.', 'john.doe@example.com'],
      ['<anna+tag@mail.example.co.uk>', 'anna+tag@mail.example.co.uk'],
    ],
    misses: ['user@localhost', 'an @ sign alone', 'foo@bar', 'price@5.00'],
  },
  phone: {
    hits: [
      ['Call +49 30 1234567 now', '+49 30 1234567'],
      ['mobil: 0151-23456789', '0151-23456789'],
      ['Tel. (030) 12345678', '(030) 12345678'],
      ['from the US +1 (415) 555-2671', '+1 (415) 555-2671'],
      ['0049 89 1234567', '0049 89 1234567'],
    ],
    misses: ['version 1.2.3', 'in 2024 we sold 1234567 units', 'ratio 0,123456', 'on 01.02.2024', '+12'],
  },
  iban: {
    hits: [
      ['IBAN: DE89 3704 0044 0532 0130 00.', 'DE89 3704 0044 0532 0130 00'],
      ['GB82WEST12345698765432', 'GB82WEST12345698765432'],
    ],
    misses: ['DE89370400440532013001', 'DE89 3704 0044 0532 0130 01', 'DE8937040044053201300'],
  },
  card: {
    hits: [
      ['card 4111 1111 1111 1111 exp', '4111 1111 1111 1111'],
      ['5500-0000-0000-0004', '5500-0000-0000-0004'],
      ['amex 378282246310005', '378282246310005'],
    ],
    misses: ['4111 1111 1111 1112', '1234567890123', 'order 12345'],
  },
  ip_address: {
    hits: [
      ['from 192.168.1.10.', '192.168.1.10'],
      ['host 2001:db8::8a2e:370:7334 up', '2001:db8::8a2e:370:7334'],
      ['loopback ::1', '::1'],
    ],
    misses: ['version 1.2.3', '999.1.1.1', 'at 12:30:45', 'a::b::c'],
  },
  de_tax_id: {
    hits: [
      ['Steuer-ID 86095742719', '86095742719'],
      ['IdNr 47 036 892 816', '47 036 892 816'],
    ],
    misses: ['86095742718', '01234567890', '11111111111', '12345678901'],
  },
  private_key: {
    hits: [
      [
        'key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----\nthanks',
        '-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----',
      ],
      [
        'cut: -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXkt',
        '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXkt',
      ],
    ],
    misses: ['-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----', '-----BEGIN CERTIFICATE-----'],
  },
  aws_key: {
    hits: [
      ['AKIAIOSFODNN7EXAMPLE', 'AKIAIOSFODNN7EXAMPLE'],
      ['aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'],
    ],
    misses: [
      'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY with no provider named',
      'AKIA1234',
      'aws: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
    ],
  },
  jwt: {
    hits: [
      [
        'token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk end',
        'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk',
      ],
    ],
    misses: ['eyJhbGciOiJIUzI1NiJ9 alone', 'eyJ.eyJ.x'],
  },
  bearer_token: {
    hits: [['Authorization: Bearer abcDEF1234567890xyz', 'abcDEF1234567890xyz']],
    misses: ['Bearer token', 'a bearer of good news', 'Bearer aaaaaaaaaaaaaaaaaaaa'],
  },
  tollgate_key: {
    hits: [[`my key is ${tollgateKey}!`, tollgateKey]],
    misses: [`${tollgateKey.slice(0, -1)}${tollgateKey.endsWith('A') ? 'B' : 'A'}`, 'tg1_short'],
  },
  gcp_key: {
    hits: [['key=AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe', 'AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe']],
    misses: ['AIzaShort'],
  },
  azure_key: {
    hits: [
      [
        `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${'Ab1+'.repeat(21)}Ab==;EndpointSuffix=core.windows.net`,
        `${'Ab1+'.repeat(21)}Ab==`,
      ],
      ['AZURE_OPENAI_API_KEY=0123456789abcdef0123456789abcdef', '0123456789abcdef0123456789abcdef'],
    ],
    misses: ['commit 0123456789abcdef0123456789abcdef'],
  },
  github_token: {
    hits: [['ghp_abcdefghijklmnopqrstuvwxyz0123456789', 'ghp_abcdefghijklmnopqrstuvwxyz0123456789']],
    misses: ['ghp_short', 'ghx_abcdefghijklmnopqrstuvwxyz0123456789'],
  },
  openai_key: {
    hits: [
      ['OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t', 'sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t'],
      ['sk-ant-api03-abcdefghij1234567890', 'sk-ant-api03-abcdefghij1234567890'],
    ],
    misses: ['sk-learn is a library', 'task-abcdefghijklmnopqrstuvwxyz'],
  },
  password: {
    hits: [
      ['password: Hunter2!xyzQ', 'Hunter2!xyzQ'],
      ['{"client_secret": "x8Fq2LmZ91aKpQ"}', 'x8Fq2LmZ91aKpQ'],
      ['Passwort=Sommer2024!Q', 'Sommer2024!Q'],
    ],
    misses: ['password: password', 'the token = aaaaaaaaaaaa', 'secret: 12345678', 'reset your password'],
  },
}

/** Detectors whose first character is a word character (a boundary before it matters), with a value each. */
const CASES_FOR_ESCAPES: Record<string, { hits: Array<[string, string]> }> = {
  tollgate_key: { hits: [['', tollgateKey]] },
  email: { hits: [['', 'erika@example.de']] },
  phone: {
    hits: [
      ['', '+49 30 1234567'],
      ['', '030 12345678'],
    ],
  },
  ip_address: { hits: [['', '2001:db8::1']] },
  iban: { hits: [['', 'DE89370400440532013000']] },
  aws_key: { hits: [['', 'AKIAIOSFODNN7EXAMPLE']] },
  gcp_key: { hits: [['', 'AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe']] },
  github_token: { hits: [['', 'ghp_abcdefghijklmnopqrstuvwxyz0123456789']] },
  openai_key: { hits: [['', 'sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t']] },
  jwt: { hits: [['', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk']] },
  bearer_token: { hits: [['', 'Bearer abcDEF1234567890xyz']] },
  password: { hits: [['', 'password: Hunter2!xyzQ']] },
}

t.test('every built-in detector has cases here', async (t) => {
  t.same([...DETECTORS.keys()].sort(), Object.keys(cases).sort())
})

for (const [name, { hits, misses }] of Object.entries(cases)) {
  t.test(name, async (t) => {
    for (const [text, expected] of hits) t.same(found(name, text), [expected], `finds it in ${JSON.stringify(text)}`)
    for (const text of misses) t.same(found(name, text), [], `lets ${JSON.stringify(text)} pass`)
  })
}

t.test(
  "after a JSON escape (a tool call's arguments are JSON in a string): found, the escape left whole",
  async (t) => {
    for (const [name, cases] of Object.entries(CASES_FOR_ESCAPES))
      for (const [, value] of cases.hits)
        for (const before of ['\n', '\t', '\u0001', '"']) {
          const text = JSON.stringify({ x: `a${before}${value}` })
          const spans = found(name, text)
          t.ok(spans.length > 0, `${name} after ${JSON.stringify(before)}`)
          t.ok(
            spans.every((s) => !s.startsWith('n') || value.startsWith('n')),
            `${name}: the escape is not in the match`,
          )
        }
  },
)

t.test('the checksums', async (t) => {
  t.ok(luhnValid('4111111111111111'))
  t.notOk(luhnValid('4111111111111112'), 'one digit off fails Luhn')
  t.ok(ibanValid('DE89370400440532013000'))
  t.notOk(ibanValid('DE89370400440532013001'), 'a wrong IBAN checksum')
  t.notOk(ibanValid('DE8937040044053201300'), "shorter than Germany's 22")
  t.ok(germanTaxIdValid('86095742719'))
  t.notOk(germanTaxIdValid('86095742718'), 'a wrong check digit')
  t.notOk(germanTaxIdValid('12345678903'), 'no digit repeated in the first ten')
  t.notOk(germanTaxIdValid('11145678903'), 'a digit three times side by side')
})

t.test('a long text without markers costs one pass (a 1 MB text in well under a second)', async (t) => {
  const text = 'lorem ipsum dolor sit amet 12345 '.repeat(32_000)
  const started = performance.now()
  for (const d of DETECTORS.values()) d.find(text)
  t.ok(performance.now() - started < 2000, `${Math.round(performance.now() - started)} ms`)
})
