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
// code about 1.1×, JSON files from npm 1.2× in the median and at least 0.85× for the
// 95 % of them that are not tables of rare characters or base64. Text built to tokenize
// densely (base64, rare CJK) is under-estimated by up to about half, as it is in messages.
//
// Serialising first costs a copy of the value (about 10 ms for 3 MB of tool schemas);
// walking the parsed value instead was no faster and needed its own stack.

/** Hundredths of a token per UTF-16 code unit of JSON text. */
const WEIGHT = new Uint8Array(0x10000)
for (let unit = 0; unit < WEIGHT.length; unit++) {
  WEIGHT[unit] = unit >= 0x61 && unit <= 0x7a
    ? 25 // lower case: words of about four letters
    : unit >= 0x41 && unit <= 0x5a
      ? 35 // capitals start a token of their own more often
      : unit >= 0x30 && unit <= 0x39
        ? 50 // digits: version numbers and ids split at every dot
        : unit === 0x20
          ? 20 // a space mostly joins the word after it
          : unit < 0x80
            ? 50 // punctuation: quotes, braces, colons, commas, escapes
            : unit < 0x800
              ? 50 // Latin accents, Greek, Cyrillic, Hebrew, Arabic
              : 100 // CJK, symbols, box drawing; each half of a surrogate pair
}

/** Estimated tokens of a JSON text. */
export function estimateJsonTextTokens(json: string): number {
  let hundredths = 0
  for (let i = 0; i < json.length; i++) hundredths += WEIGHT[json.charCodeAt(i)] as number
  return Math.ceil(hundredths / 100)
}

/** Estimated tokens of `value` written as compact JSON; 0 for what JSON leaves out (undefined). */
export function estimateJsonTokens(value: unknown): number {
  const json = JSON.stringify(value) as string | undefined
  return json === undefined ? 0 : estimateJsonTextTokens(json)
}
