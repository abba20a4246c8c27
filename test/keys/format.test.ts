// The key format: recognisable prefix, 256 bits of randomness, a checksum that refuses a
// mistyped key without a store lookup, and a keyed hash in place of the key.
import t from 'tap'
import {
  createKeyHasher,
  DISPLAY_LENGTH,
  displayPrefix,
  generateKey,
  isWellFormedKey,
  KEY_PREFIX,
} from '../../src/keys/format.ts'

const BASE62 = /^[0-9A-Za-z]+$/

t.test('a key has the prefix, 43 random base62 characters and a 6-character checksum', async (t) => {
  const key = generateKey()
  t.equal(key.slice(0, 4), 'tg1_', 'prefix with version, for secret scanners')
  t.equal(KEY_PREFIX, 'tg1_')
  t.equal(key.length, 4 + 43 + 6)
  t.match(key.slice(4), BASE62)
  t.ok(isWellFormedKey(key), 'a fresh key is well formed')
  // 43 base62 digits hold 43·log2(62) ≈ 256.03 bits: room for all 256 random bits.
  t.ok(43 * Math.log2(62) >= 256, 'the body holds 256 bits')
})

t.test('keys do not repeat and use the whole alphabet', async (t) => {
  const keys = new Set<string>()
  const seen = new Set<string>()
  for (let i = 0; i < 2000; i++) {
    const key = generateKey()
    keys.add(key)
    for (const c of key.slice(4, 47)) seen.add(c)
  }
  t.equal(keys.size, 2000, 'no duplicates')
  t.equal(seen.size, 62, 'every base62 character appears')
})

t.test('every one-character typo and every swap of neighbours is refused by the checksum', async (t) => {
  const key = generateKey()
  let refused = 0
  let tried = 0
  for (let i = KEY_PREFIX.length; i < key.length; i++) {
    for (const c of ['0', 'a', 'Z', 'q']) {
      if (key[i] === c) continue
      tried++
      if (!isWellFormedKey(key.slice(0, i) + c + key.slice(i + 1))) refused++
    }
    if (i + 1 < key.length && key[i] !== key[i + 1]) {
      tried++
      if (!isWellFormedKey(key.slice(0, i) + key[i + 1] + key[i] + key.slice(i + 2))) refused++
    }
  }
  t.equal(refused, tried, `all ${tried} mistyped variants refused`)
})

t.test('anything not shaped like a key is refused', async (t) => {
  const key = generateKey()
  for (const bad of [
    '',
    'tg1_',
    key.slice(0, -1),
    key + 'a',
    'tg2_' + key.slice(4),
    'TG1_' + key.slice(4),
    key.replace(/.$/, '-'),
    ` ${key}`,
    'sk-' + key.slice(3),
  ]) {
    t.notOk(isWellFormedKey(bad), `refused: ${JSON.stringify(bad.slice(0, 12))}…`)
  }
})

t.test('the stored hash is an HMAC under the server secret; only a short prefix is kept for display', async (t) => {
  const key = generateKey()
  const a = createKeyHasher('secret-a-0123456789abcdef0123456789')
  const b = createKeyHasher('secret-b-0123456789abcdef0123456789')
  t.equal(a(key), a(key), 'deterministic')
  t.match(a(key), /^[0-9a-f]{64}$/, 'hex SHA-256')
  t.not(a(key), b(key), 'another secret gives another hash: a stolen table is useless without the secret')
  t.notMatch(a(key), key.slice(4, 20))
  t.equal(displayPrefix(key).length, DISPLAY_LENGTH)
  t.equal(displayPrefix(key), key.slice(0, 12))
  t.ok(DISPLAY_LENGTH - KEY_PREFIX.length <= 8, 'the display prefix gives away at most 8 of the 43 random characters')
})
