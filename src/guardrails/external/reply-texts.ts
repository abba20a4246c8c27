// The texts of a whole reply with where they are, for the external checks that read replies:
// the strings replyTexts (reply-check.ts) reads, by the same walk, each with its path
// (`choices[0].message.content`) and the steps to it, so a webhook's rewrite goes back in
// its place (text-fields.ts withTexts).
import { eachReplyText } from '../reply-check.ts'

export interface ReplyText {
  readonly path: string
  readonly steps: Array<string | number>
  text: string
}

/** Every non-empty text of `reply`, in order. */
export function replyTextsAt(reply: unknown): ReplyText[] {
  const out: ReplyText[] = []
  eachReplyText(reply, (text, trail) => {
    if (text !== '') out.push({ path: pathOf(trail), steps: [...trail], text })
  })
  return out
}

/** `choices[0].message.content` of its steps. */
function pathOf(trail: ReadonlyArray<string | number>): string {
  let path = ''
  for (const step of trail) path += typeof step === 'number' ? `[${step}]` : path === '' ? step : `.${step}`
  return path
}
