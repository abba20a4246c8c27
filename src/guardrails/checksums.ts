// The check digits that tell a real number from a look-alike: Luhn for payment cards,
// ISO 13616 mod 97 for IBANs, ISO 7064 MOD 11,10 (with the digit-repetition rule) for the
// German tax ID. Pure functions over strings of digits (and letters for an IBAN); a leaf.

/** Luhn (ISO/IEC 7812-1) over a string of digits. */
export function luhnValid(digits: string): boolean {
  let sum = 0
  let double = false
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48
    if (d < 0 || d > 9) return false
    if (double) {
      d *= 2
      if (d > 9) d -= 9
    }
    sum += d
    double = !double
  }
  return digits.length > 0 && sum % 10 === 0
}

/** IBAN lengths of the countries most often seen (ISO 13616 registry); others: 15 to 34. */
// prettier-ignore
const IBAN_LENGTHS: Readonly<Record<string, number>> = {
  AD: 24, AT: 20, BE: 16, BG: 22, CH: 21, CY: 28, CZ: 24, DE: 22, DK: 18, EE: 20, ES: 24, FI: 18,
  FR: 27, GB: 22, GR: 27, HR: 21, HU: 28, IE: 22, IS: 26, IT: 27, LI: 21, LT: 20, LU: 20, LV: 21,
  MC: 27, MT: 31, NL: 18, NO: 15, PL: 28, PT: 25, RO: 24, SE: 24, SI: 19, SK: 24, SM: 27, UA: 29,
}

/** An IBAN without spaces, upper case: its country's length and mod 97 = 1. */
export function ibanValid(iban: string): boolean {
  if (!/^[A-Z]{2}\d{2}[A-Z0-9]{11,30}$/.test(iban)) return false
  const expected = IBAN_LENGTHS[iban.slice(0, 2)]
  if (expected !== undefined && iban.length !== expected) return false
  // The first four characters moved to the end, letters as 10..35, read mod 97 piece by piece.
  const moved = iban.slice(4) + iban.slice(0, 4)
  let remainder = 0
  for (let i = 0; i < moved.length; i++) {
    const c = moved.charCodeAt(i)
    if (c >= 65) remainder = (remainder * 100 + (c - 55)) % 97
    else remainder = (remainder * 10 + (c - 48)) % 97
  }
  return remainder === 1
}

/**
 * The German tax identification number (Steuerliche Identifikationsnummer, § 139b AO):
 * 11 digits, the first not 0; in the first ten, exactly one digit is there twice or three
 * times (three times never all side by side) and the others at most once; the eleventh is
 * the ISO 7064 MOD 11,10 check digit of the first ten.
 */
export function germanTaxIdValid(digits: string): boolean {
  if (!/^[1-9]\d{10}$/.test(digits)) return false
  const counts = new Array<number>(10).fill(0)
  for (let i = 0; i < 10; i++) counts[digits.charCodeAt(i) - 48]! += 1
  const repeated = counts.filter((c) => c > 1)
  if (repeated.length !== 1 || repeated[0]! > 3) return false
  if (repeated[0] === 3) {
    for (let i = 0; i + 2 < 10; i++) if (digits[i] === digits[i + 1] && digits[i] === digits[i + 2]) return false
  }
  let product = 10
  for (let i = 0; i < 10; i++) {
    let sum = (digits.charCodeAt(i) - 48 + product) % 10
    if (sum === 0) sum = 10
    product = (sum * 2) % 11
  }
  const check = (11 - product) % 10
  return check === digits.charCodeAt(10) - 48
}

/** Shannon entropy in bits per character: a random secret is high, a word or a repeated run low. */
export function entropyBits(text: string): number {
  const counts = new Map<string, number>()
  for (const c of text) counts.set(c, (counts.get(c) ?? 0) + 1)
  let bits = 0
  for (const n of counts.values()) {
    const p = n / text.length
    bits -= p * Math.log2(p)
  }
  return bits
}
