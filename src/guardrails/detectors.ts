// The built-in detectors: each finds one kind of personal data or secret in a text and
// checks what it found (a checksum, a context word, a shape) before it counts. Each is a
// small pure function from a text to the spans it holds; none keeps state between calls.
//
// Every regular expression here has a bounded repetition at each step (no nested
// unbounded quantifiers), so a scan is linear in the text; the ones that need a marker
// (an '@', '-----BEGIN', 'eyJ', a prefix) are not even run on a text without it.
import { isIPv6 } from 'node:net'
import { isWellFormedKey } from '../keys/format.ts'
import { entropyBits, germanTaxIdValid, ibanValid, luhnValid } from './checksums.ts'

/** Where a match stands in a text: [start, end). */
export interface Span {
  readonly start: number
  readonly end: number
}

export interface Detector {
  /** The name a policy gives an action to (`detectors: {email: mask}`). */
  readonly name: string
  /** The placeholder's type when masked: `[EMAIL_1]`. */
  readonly label: string
  /** What it finds, for docs and the admin reader. */
  readonly finds: string
  find(text: string): Span[]
}

/**
 * A pattern that must start at a boundary: not right after a character of `notAfter` (one
 * character's class), unless a JSON escape ends there. Checked on each match rather than
 * as a leading lookbehind, which would make the engine try the lookbehind at every
 * position of the text instead of skipping to where the pattern's first characters stand
 * (the `password` detector cost a 1 MB body 3.4 ms with it, 1.3 ms without: bench/results.md).
 */
interface Bounded {
  readonly pattern: RegExp
  readonly notAfter: RegExp
}

// Text in a tool call's arguments is JSON in a string: a match after a newline there stands
// after the two characters `\n`, a word character among them. A JSON escape before a match
// counts as the boundary it stands for (found by the guardrails fuzz part).
const ESCAPE_BEFORE = /\\(?:[bfnrt]|u[0-9A-Fa-f]{4})$/
/** `source` found where it starts at the start, after a character outside `chars` (a class body), or after a JSON escape. */
const after = (chars: string, source: string, flags = 'g'): Bounded => ({
  pattern: new RegExp(source, flags),
  notAfter: new RegExp(`[${chars}]`),
})
/** `\b` before a word character, a JSON escape counted as a boundary. */
const START = String.raw`\w`

function startsAtBoundary(text: string, index: number, notAfter: RegExp): boolean {
  if (index === 0 || !notAfter.test(text[index - 1]!)) return true
  return ESCAPE_BEFORE.test(text.slice(Math.max(0, index - 6), index))
}

/** Every match of `find` (global) whose `accept` is true; `group` picks a capture as the span. */
function spans(
  text: string,
  find: RegExp | Bounded,
  accept: (match: RegExpExecArray) => boolean = () => true,
  group = 0,
): Span[] {
  const out: Span[] = []
  const pattern = find instanceof RegExp ? find : find.pattern
  const notAfter = find instanceof RegExp ? undefined : find.notAfter
  pattern.lastIndex = 0
  for (let m = pattern.exec(text); m !== null; m = pattern.exec(text)) {
    if (m[0] === '') {
      pattern.lastIndex++
      continue
    }
    if (notAfter !== undefined && !startsAtBoundary(text, m.index, notAfter)) {
      // Not a match here; one may start at the next character, as the lookbehind would have let it.
      pattern.lastIndex = m.index + 1
      continue
    }
    if (!accept(m)) continue
    const captured = m[group]
    if (captured === undefined) continue
    const start = group === 0 ? m.index : m.index + m[0].indexOf(captured)
    out.push({ start, end: start + captured.length })
  }
  return out
}

const digitsOf = (s: string): string => s.replace(/\D/g, '')

// E-mail: found from each '@' outwards, so a long text without one costs one indexOf.
const LOCAL = /[A-Za-z0-9._%+'-]/
const DOMAIN = /[A-Za-z0-9.-]/
function findEmails(text: string): Span[] {
  const out: Span[] = []
  for (let at = text.indexOf('@'); at !== -1; at = text.indexOf('@', at + 1)) {
    let start = at
    while (start > 0 && at - start < 64 && LOCAL.test(text[start - 1]!)) start--
    let end = at + 1
    while (end < text.length && end - at < 254 && DOMAIN.test(text[end]!)) end++
    while (end > at + 1 && (text[end - 1] === '.' || text[end - 1] === '-')) end-- // a sentence's full stop
    if (start > 0 && text[start - 1] === '\\') start += /^u[0-9A-Fa-f]{4}/.test(text.slice(start, start + 5)) ? 5 : 1 // a JSON escape's letters
    while (start < at && text[start] === '.') start++
    if (start === at || (out.length > 0 && out[out.length - 1]!.end > start)) continue
    const domain = text.slice(at + 1, end)
    if (/^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}$/.test(domain)) out.push({ start, end })
  }
  return out
}

const PHONE_INTERNATIONAL = after(String.raw`\w+`, String.raw`(?:\+|00)[1-9](?:[ \-./]?\(?\d\)?){6,16}(?!\d)`)
const PHONE_GERMAN = after(
  String.raw`\w.,`,
  String.raw`(?:\(0[1-9]\d{1,4}\)|0[1-9]\d{1,4})(?:[ \-/]?\d){4,11}(?![\d,.]\d|\d)`,
)
function findPhones(text: string): Span[] {
  const international =
    !text.includes('+') && !text.includes('00')
      ? []
      : spans(text, PHONE_INTERNATIONAL, (m) => {
          const n = digitsOf(m[0]).length - (m[0].startsWith('00') ? 2 : 0)
          return n >= 8 && n <= 15
        })
  const national = spans(text, PHONE_GERMAN, (m) => {
    const n = digitsOf(m[0]).length
    return n >= 7 && n <= 14
  })
  return merge(international, national)
}

const IBAN = after(START, String.raw`[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b`)
const findIbans = (text: string): Span[] => spans(text, IBAN, (m) => ibanValid(m[0].replaceAll(' ', '')))

const CARD = /(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d])/g
const findCards = (text: string): Span[] =>
  spans(text, CARD, (m) => {
    const digits = digitsOf(m[0])
    return digits.length >= 13 && digits.length <= 19 && luhnValid(digits)
  })

const OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)'
const IPV4 = new RegExp(`(?<![\\d.])${OCTET}(?:\\.${OCTET}){3}(?!\\d|\\.\\d)`, 'g')
const IPV6_CANDIDATE = after(
  String.raw`\w:.`,
  String.raw`[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:%[0-9A-Za-z]{1,16})?(?![\w:])`,
)
function findIps(text: string): Span[] {
  const v4 = text.includes('.') ? spans(text, IPV4) : []
  const v6 = text.includes(':') ? spans(text, IPV6_CANDIDATE, (m) => /[0-9A-Fa-f]/.test(m[0]) && isIPv6(m[0])) : []
  return merge(v4, v6)
}

const TAX_ID = /(?<![\d])[1-9](?:[ /]?\d){10}(?!\d)/g
const findTaxIds = (text: string): Span[] => spans(text, TAX_ID, (m) => germanTaxIdValid(digitsOf(m[0])))

const PEM =
  /-----BEGIN (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:,-]*)/g
const findPrivateKeys = (text: string): Span[] => (text.includes('-----BEGIN ') ? spans(text, PEM) : [])

const AWS_KEY_ID = after(START, String.raw`(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA)[A-Z0-9]{16}\b`)
const AWS_SECRET = /(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])/g
/** A 40-character secret counts only with `aws` in the 120 characters before it. */
function findAwsKeys(text: string): Span[] {
  const ids = spans(text, AWS_KEY_ID)
  if (!mentions(text, /aws/i)) return ids
  const secrets = spans(text, AWS_SECRET, (m) => {
    const before = text.slice(Math.max(0, m.index - 120), m.index)
    return /aws/i.test(before) && mixed(m[0]) && entropyBits(m[0]) > 3.5
  })
  return merge(ids, secrets)
}

// The literal gates search from a rarer letter than the marker's first ('yJ' for 'eyJ'): a
// substring search skips ahead by its first character, and prose is full of 'e', 't', 's'.
const JWT = after(START, String.raw`eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`)
const findJwts = (text: string): Span[] => (text.includes('yJ') ? spans(text, JWT) : [])

const BEARER = after(START, String.raw`Bearer[ \t]+([A-Za-z0-9\-._~+/]{16,}={0,2})`, 'gi')
const findBearer = (text: string): Span[] => spans(text, BEARER, (m) => mixed(m[1] ?? ''), 1)

const TOLLGATE_KEY = after(START, String.raw`tg1_[0-9A-Za-z]{49}\b`)
const findTollgateKeys = (text: string): Span[] =>
  text.includes('g1_') ? spans(text, TOLLGATE_KEY, (m) => isWellFormedKey(m[0])) : []

const GCP_KEY = after(START, String.raw`AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])`)
const findGcpKeys = (text: string): Span[] => (text.includes('AIza') ? spans(text, GCP_KEY) : [])

const GITHUB_TOKEN = after(START, String.raw`(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b`)
const findGithubTokens = (text: string): Span[] => (text.includes('_') ? spans(text, GITHUB_TOKEN) : [])

const OPENAI_KEY = after(START, String.raw`sk-(?:proj-|svcacct-|admin-|ant-)?[A-Za-z0-9_-]{20,200}(?![A-Za-z0-9_-])`)
const findOpenAiKeys = (text: string): Span[] =>
  text.includes('k-') ? spans(text, OPENAI_KEY, (m) => mixed(m[0].slice(3))) : []

const AZURE_ACCOUNT_KEY = /AccountKey=([A-Za-z0-9+/]{86}==)/g
const AZURE_SAS = /[?&]sig=([A-Za-z0-9%+/]{40,120}(?:%3D|=){0,2})/g
const HEX32 = /(?<![0-9a-fA-F])[0-9a-f]{32}(?![0-9a-fA-F])/g
/** Storage account keys and SAS signatures; a 32-hex key counts only with `azure` in the 120 characters before it. */
function findAzureKeys(text: string): Span[] {
  const found = text.includes('=')
    ? merge(spans(text, AZURE_ACCOUNT_KEY, undefined, 1), spans(text, AZURE_SAS, undefined, 1))
    : []
  if (!mentions(text, /azure/i)) return found
  const hex = spans(text, HEX32, (m) => /azure/i.test(text.slice(Math.max(0, m.index - 120), m.index)))
  return merge(found, hex)
}

const SECRET_ASSIGNMENT = after(
  START,
  String.raw`(?:password|passwd|pwd|passwort|kennwort|secret|client[_-]?secret|api[_-]?key|access[_-]?token|auth[_-]?token|token)\b["']?[ \t]{0,4}[:=][ \t]{0,4}["']?([^\s"'\x60,;]{8,200})`,
  'gi',
)
/** A value after a password/secret/token word that looks random: long, of mixed kinds, high entropy. */
const findPasswords = (text: string): Span[] =>
  !text.includes(':') && !text.includes('=')
    ? []
    : spans(
        text,
        SECRET_ASSIGNMENT,
        (m) => {
          const value = m[1] ?? ''
          return mixed(value) && entropyBits(value) >= 3
        },
        1,
      )

/**
 * Whether `text` holds `word` (lower case letters, flag i) in any case: a case-insensitive regular
 * expression over a whole text costs more than a plain search for its rarer second letter
 * in both cases, which most texts fail.
 */
function mentions(text: string, word: RegExp): boolean {
  const second = word.source[1]!
  if (!text.includes(second) && !text.includes(second.toUpperCase())) return false
  return word.test(text)
}

/** Letters and digits both (or other symbols): not a word, not a number. */
function mixed(value: string): boolean {
  return /[A-Za-z]/.test(value) && /[^A-Za-z]/.test(value)
}

/** Two lists of spans as one, in order, an overlapping later one dropped. */
export function merge(a: readonly Span[], b: readonly Span[]): Span[] {
  if (b.length === 0) return [...a]
  if (a.length === 0) return [...b]
  const all = [...a, ...b].sort((x, y) => x.start - y.start || y.end - x.end)
  const out: Span[] = []
  for (const s of all) if (out.length === 0 || s.start >= out[out.length - 1]!.end) out.push(s)
  return out
}

/** The built-in detectors, by name; a policy names them. Secrets first: of two that find the very same span, the first keeps it. */
export const DETECTORS: ReadonlyMap<string, Detector> = new Map(
  (
    [
      ['private_key', 'PRIVATE_KEY', 'PEM private keys (RSA, EC, OpenSSH, PKCS#8), also cut off', findPrivateKeys],
      ['tollgate_key', 'TOLLGATE_KEY', "Tollgate's own API keys (tg1_…, checksum verified)", findTollgateKeys],
      ['aws_key', 'AWS_KEY', 'AWS access key ids (AKIA…, ASIA…) and secret keys near the word aws', findAwsKeys],
      ['gcp_key', 'GCP_KEY', 'Google Cloud API keys (AIza…)', findGcpKeys],
      ['azure_key', 'AZURE_KEY', 'Azure account keys, SAS signatures, 32-hex keys near "azure"', findAzureKeys],
      ['github_token', 'GITHUB_TOKEN', 'GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_)', findGithubTokens],
      ['openai_key', 'API_KEY', 'OpenAI-style keys (sk-…, sk-proj-…; also sk-ant-…)', findOpenAiKeys],
      ['jwt', 'JWT', 'JSON Web Tokens (eyJ….eyJ….…)', findJwts],
      ['bearer_token', 'BEARER_TOKEN', 'the token after "Bearer "', findBearer],
      ['password', 'SECRET', 'a random-looking value after password, secret, token, api_key, Passwort', findPasswords],
      ['email', 'EMAIL', 'e-mail addresses', findEmails],
      ['iban', 'IBAN', 'IBANs, mod-97 checksum verified', findIbans],
      ['card', 'CARD', 'payment card numbers, 13 to 19 digits, Luhn verified', findCards],
      ['de_tax_id', 'TAX_ID', 'German tax IDs (Steuer-IdNr), check digit and repetition rule verified', findTaxIds],
      ['phone', 'PHONE', 'phone numbers: international (+49 …, 0049 …), German national (030 …)', findPhones],
      ['ip_address', 'IP', 'IPv4 and IPv6 addresses', findIps],
    ] as const
  ).map(([name, label, finds, find]): [string, Detector] => [name, { name, label, finds, find }]),
)
