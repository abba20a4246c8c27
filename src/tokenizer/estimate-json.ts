// A linear estimate of the tokens of a JSON value, as its compact text (JSON.stringify's,
// which is also how the mock backend and a chat template such as vLLM's render tool
// definitions into the prompt). Admission reserves on it for the parts of a request that
// are not its messages: tool and function definitions, output schemas, predictions,
// metadata, whatever else a client sends.
//
// The weights differ from the prose weights of estimate-text.ts on purpose: schemas and
// code are denser in tokens than prose (punctuation, digits and capitals split words),
// and the prose weights under-estimate them by up to a third. These sit above
// o200k_base's count of ordinary JSON: tool schemas with English descriptions about 1.35×,
// code about 1.05×, JSON files from npm 1.2× in the median and at least 0.85× for the 95 %
// of them that are not tables of rare characters or base64. Text built to tokenize
// densely (base64, rare CJK) is under-estimated by up to about half, as it is in messages.
//
// The value is walked in place, not serialised: no copy of a 4 MB body, and no slower
// than JSON.stringify on a body of many small objects.

/** Hundredths of a token per UTF-16 code unit of JSON text. */
const TEXT_WEIGHT = new Uint8Array(0x10000)
for (let unit = 0; unit < TEXT_WEIGHT.length; unit++) {
  TEXT_WEIGHT[unit] =
    unit >= 0x61 && unit <= 0x7a
      ? 25 // lower case: words of about four letters
      : unit >= 0x41 && unit <= 0x5a
        ? 35 // capitals start a token of their own more often
        : unit >= 0x30 && unit <= 0x39
          ? 50 // digits: version numbers and ids split at every dot
          : unit === 0x20
            ? 20 // a space mostly joins the word after it
            : unit < 0x80
              ? 50 // punctuation: quotes, braces, colons, commas
              : unit < 0x800
                ? 50 // Latin accents, Greek, Cyrillic, Hebrew, Arabic
                : 100 // CJK, symbols, box drawing; each half of a surrogate pair
}

/** The same for a unit inside a string, which JSON writes escaped where it must. */
const STRING_WEIGHT = TEXT_WEIGHT.slice()
for (let unit = 0; unit < 0x20; unit++) STRING_WEIGHT[unit] = 255 // \u00XX: six characters
for (const unit of [0x22, 0x5c, 0x08, 0x09, 0x0a, 0x0c, 0x0d]) STRING_WEIGHT[unit] = 100 // \" \\ \b \t \n \f \r

/** The punctuation around values: a quote, a brace or bracket, a colon, a comma. */
const MARK = 50

function stringHundredths(text: string): number {
  let hundredths = 2 * MARK
  for (let i = 0; i < text.length; i++) hundredths += STRING_WEIGHT[text.charCodeAt(i)] as number
  return hundredths
}

/** Estimated tokens of a JSON text. */
export function estimateJsonTextTokens(json: string): number {
  let hundredths = 0
  for (let i = 0; i < json.length; i++) hundredths += TEXT_WEIGHT[json.charCodeAt(i)] as number
  return Math.ceil(hundredths / 100)
}

/** Estimated tokens of `value` written as compact JSON; 0 for what JSON leaves out (undefined). */
export function estimateJsonTokens(value: unknown): number {
  if (value === undefined) return 0
  let hundredths = 0
  // Iterative: a parsed body may be nested as deep as it likes.
  const stack: unknown[] = [value]
  while (stack.length > 0) {
    const item = stack.pop()
    if (typeof item === 'string') {
      hundredths += stringHundredths(item)
    } else if (typeof item === 'number') {
      hundredths += stringHundredths(String(item)) - 2 * MARK
    } else if (typeof item !== 'object' || item === null) {
      hundredths += 100 // true, false, null
    } else if (Array.isArray(item)) {
      hundredths += MARK * (1 + Math.max(item.length, 1)) // [ ] and the commas
      for (const child of item) stack.push(child)
    } else {
      let members = 0
      for (const key in item) {
        members++
        hundredths += stringHundredths(key) + MARK // "key":
        stack.push((item as Record<string, unknown>)[key])
      }
      hundredths += MARK * (1 + Math.max(members, 1)) // { } and the commas
    }
  }
  return Math.ceil(hundredths / 100)
}
